package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/opendlc/opendlc/runs"
)

// RunsConfig is the run record database (package runs): the worker writes a record when
// a job, experiment or pipeline run ends; the API answers history, lineage and usage
// from it, and purges delete from it.
type RunsConfig struct {
	// Database is the database's DSN (runs.Open): postgres://… in production, or
	// sqlite:PATH. Empty: no records are kept.
	Database string
	// Retention is how long a record is kept after its run ended; the API process
	// deletes older ones every SweepEvery. Zero keeps records forever.
	Retention time.Duration
	// SweepEvery is the time between sweeps; default DefaultRunsSweepEvery.
	SweepEvery time.Duration
}

// DefaultRunsSweepEvery is the time between two sweeps of expired run records.
const DefaultRunsSweepEvery = time.Hour

// openRuns opens the run record database for the process's worker and API, and with
// the API and a retention starts the sweep that expires old records.
func (p *Process) openRuns(ctx context.Context, cfg Config) error {
	if cfg.Runs.Database == "" || (!cfg.Worker && cfg.API == nil) {
		return nil
	}
	store, err := runs.Open(ctx, cfg.Runs.Database)
	if err != nil {
		return fmt.Errorf("app: run records: %w", err)
	}
	p.Runs = store
	p.closers = append(p.closers, store.Close)
	if cfg.API != nil && cfg.Runs.Retention > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			sweepRuns(ctx, store, cfg.Runs.Retention, cfg.Runs.SweepEvery, cfg.Logger)
		}()
		p.closers = append(p.closers, func() error { cancel(); <-done; return nil })
	}
	return nil
}

// sweepRuns expires the records older than retention now and then every interval,
// until ctx ends.
func sweepRuns(ctx context.Context, store runs.Store, retention, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		every = DefaultRunsSweepEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := store.Expire(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("run records not expired", "error", err)
		case n > 0:
			logger.Info("run records expired", "count", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
