package app

import (
	"context"
	"fmt"
	"time"

	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/storage"
)

// LogArchiveConfig configures the archive of finished jobs' logs in S3 (package
// logarchive): the worker writes it, the API reads it once the log stream has
// dropped a job's lines, and the API process's janitor expires it.
type LogArchiveConfig struct {
	// Root, s3://bucket[/prefix], is where a workspace without storage locations
	// archives: Root/<workspace>/logs/. Workspaces with locations (StorageRoot, or
	// their registry entry) archive under their first location. Default StorageRoot;
	// with neither, such workspaces' logs are not archived.
	Root string
	// Retention is how long an archive is kept after the job ended; the API process
	// deletes older ones every SweepEvery. Zero keeps archives forever.
	Retention time.Duration
	// SweepEvery is the time between sweeps; default logarchive.DefaultSweepEvery.
	SweepEvery time.Duration
}

// startLogArchive opens the archive the API reads, and starts the janitor when a
// retention is set.
func (p *Process) startLogArchive(cfg Config) (*logarchive.Store, error) {
	store, err := logarchive.New(cfg.S3)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if cfg.LogArchive.Retention > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		j := &logarchive.Janitor{Store: store, Retention: cfg.LogArchive.Retention, Every: cfg.LogArchive.SweepEvery,
			Logger: cfg.Logger, Roots: func(ctx context.Context) ([]string, error) { return p.archiveRoots(ctx, cfg, store) }}
		done := make(chan struct{})
		go func() { defer close(done); j.Run(ctx) }()
		p.closers = append(p.closers, func() error { cancel(); <-done; return nil })
	}
	return store, nil
}

// archiveRoots lists where archives may lie: the first location of every registered
// workspace, and every workspace's directory under the archive root.
func (p *Process) archiveRoots(ctx context.Context, cfg Config, store *logarchive.Store) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(r string) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	if p.Auth != nil {
		wss, err := p.Auth.ListWorkspaces(ctx)
		if err != nil {
			return nil, err
		}
		policy := &storage.Policy{Root: cfg.StorageRoot, Workspaces: p.Auth}
		for _, ws := range wss {
			locs, err := policy.Locations(ctx, ws.Name)
			if err != nil {
				return nil, err
			}
			if len(locs) > 0 {
				add(logarchive.Root(locs[0]))
			}
		}
	}
	for _, root := range []string{cfg.StorageRoot, cfg.LogArchive.Root} {
		if root == "" {
			continue
		}
		roots, err := store.WorkspaceRoots(ctx, root)
		if err != nil {
			return nil, err
		}
		for _, r := range roots {
			add(r)
		}
	}
	return out, nil
}
