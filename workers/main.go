package workers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/workflows"
)

// Config is what a worker needs to reach Temporal, NATS, S3 and its backend.
type Config struct {
	// TemporalAddress is host:port of the Temporal frontend.
	TemporalAddress string
	// Namespace is the Temporal namespace; default "default".
	Namespace string
	// TaskQueue; default workflows.TaskQueue.
	TaskQueue string
	// TemporalTLS, when set, connects to Temporal over TLS (mTLS with a client
	// certificate). Default: plain text.
	TemporalTLS *tls.Config
	// NATSURL is the NATS server URL.
	NATSURL string
	// Streams configure the event and log streams' retention (the worker creates or
	// updates them at start). Default: jetstream's defaults.
	Streams []jetstream.Option
	// NATSOptions carry credentials and TLS settings (nats.UserCredentials,
	// nats.UserInfo, nats.RootCAs...). Default none.
	NATSOptions []nats.Option
	// S3 is how the control plane reads checkpoints.
	S3 checkpoint.Config
	// Backend runs the gangs.
	Backend backend.Backend
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Interceptors wrap workflow and activity calls (tracing, metrics, fault injection
	// in tests). Default none.
	Interceptors []interceptor.WorkerInterceptor
}

// Main is a running worker: a Temporal worker with the workflows and activities
// registered, and the clients it holds. Close stops it.
type Main struct {
	Temporal client.Client
	Events   *jetstream.Client
	worker   worker.Worker
}

// Start connects to Temporal and NATS, makes sure the event streams exist, and starts
// polling the task queue.
func Start(ctx context.Context, cfg Config) (*Main, error) {
	if cfg.Backend == nil {
		return nil, errors.New("workers: Config.Backend is required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = workflows.TaskQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tc, err := client.DialContext(ctx, client.Options{
		HostPort:          cfg.TemporalAddress,
		Namespace:         cfg.Namespace,
		Logger:            sdklog.NewStructuredLogger(cfg.Logger),
		ConnectionOptions: client.ConnectionOptions{TLS: cfg.TemporalTLS},
	})
	if err != nil {
		return nil, fmt.Errorf("workers: dial temporal %s: %w", cfg.TemporalAddress, err)
	}
	ev, err := jetstream.Connect(cfg.NATSURL, cfg.NATSOptions...)
	if err != nil {
		tc.Close()
		return nil, err
	}
	if err := ev.EnsureStreams(ctx, cfg.Streams...); err != nil {
		ev.Close()
		tc.Close()
		return nil, err
	}
	store, err := checkpoint.NewStore(cfg.S3)
	if err != nil {
		ev.Close()
		tc.Close()
		return nil, fmt.Errorf("workers: checkpoint store: %w", err)
	}
	w := worker.New(tc, cfg.TaskQueue, worker.Options{
		// A cancelled activity learns of it from a heartbeat response, and the SDK sends
		// heartbeats at most once per throttle interval (by default 80% of the heartbeat
		// timeout). A short interval makes `dlc stop` take about a second, not 16.
		MaxHeartbeatThrottleInterval: time.Second,
		Interceptors:                 cfg.Interceptors,
	})
	RegisterWorkflows(w)
	RegisterActivities(w, &activities.JobActivities{
		Backend:     cfg.Backend,
		Publisher:   ev,
		Checkpoints: checkpointFinder{store},
		LogStream:   jetstream.LogsStream,
	})
	RegisterQuotaActivities(w, &activities.QuotaActivities{Client: tc})
	RegisterScheduleActivities(w, &activities.ScheduleActivities{Objects: store, Jobs: jobControl{tc}})
	RegisterExperimentActivities(w, &activities.ExperimentActivities{Events: ev, EventStream: jetstream.EventsStream, Temporal: tc})
	RegisterPipelineActivities(w, &activities.PipelineActivities{Workflows: tc, Events: ev, EventsStream: jetstream.EventsStream})
	if err := w.Start(); err != nil {
		ev.Close()
		tc.Close()
		return nil, fmt.Errorf("workers: start: %w", err)
	}
	startNodeHealth(ctx, tc, cfg)
	return &Main{Temporal: tc, Events: ev, worker: w}, nil
}

// Close stops polling, waits for running activities to return, and closes the clients.
func (m *Main) Close() {
	m.worker.Stop()
	m.Events.Close()
	m.Temporal.Close()
}

// checkpointFinder adapts the checkpoint store to activities.CheckpointFinder.
type checkpointFinder struct{ s *checkpoint.Store }

func (f checkpointFinder) Latest(ctx context.Context, uri string) (string, error) {
	m, err := f.s.Latest(ctx, uri)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return m.Ref, nil
}

// Prune makes checkpointFinder an activities.CheckpointPruner.
func (f checkpointFinder) Prune(ctx context.Context, uri string, keep int) ([]int64, error) {
	return f.s.Prune(ctx, uri, keep)
}
