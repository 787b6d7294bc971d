package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/templates"
	"github.com/opendlc/opendlc/workflows"
)

// Config is what a worker needs: its connections to Temporal and NATS, S3 and its
// backend. app.Start assembles one from a process's configuration; use that, not this,
// to run a worker.
type Config struct {
	// Temporal is the client the worker polls with. Required; Close leaves it open.
	Temporal client.Client
	// Events publishes events and log lines. Required; Close leaves it open. The streams
	// must exist (events/jetstream.EnsureStreams).
	Events *jetstream.Client
	// TaskQueue; default workflows.TaskQueue.
	TaskQueue string
	// S3 is how the control plane reads checkpoints.
	S3 checkpoint.Config
	// StorageRoot is the root of the workspaces' default S3 locations (storage.Policy):
	// jobs whose URIs leave their workspace's locations fail at launch, and checkpoints
	// are pruned only inside them. "" restricts only the workspaces whose registry entry
	// names locations.
	StorageRoot string
	// LogArchiveRoot, s3://bucket[/prefix], is where a workspace whose locations are
	// unrestricted archives its jobs' logs: LogArchiveRoot/<workspace>/logs/ (other
	// workspaces archive under their first location). Default StorageRoot; with
	// neither, such workspaces' logs are not archived.
	LogArchiveRoot string
	// Backend runs the gangs.
	Backend backend.Backend
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Interceptors wrap workflow and activity calls (tracing, metrics, fault injection
	// in tests). Default none.
	Interceptors []interceptor.WorkerInterceptor
	// Metrics records the activities' launches, phase changes and log lines; nil
	// records nothing.
	Metrics *metrics.Registry
	// HeartbeatBudget is the heartbeats a second the job-long activities share
	// (activities.JobActivities.HeartbeatBudget); 0: the default.
	HeartbeatBudget float64
	// ResourceInterval is how often replicas' resources are sampled
	// (activities.JobActivities.ResourceInterval); 0: the default, negative: never.
	ResourceInterval time.Duration
	// Runs is the run record database the jobs, experiments and pipeline runs write
	// their records to when they end (package runs); nil: no records are kept.
	// Close leaves it open.
	Runs runs.Store
	// LongHeartbeatTimeout is the heartbeat timeout of the job-long activities
	// (workflows.SetLongHeartbeatTimeout; it applies to the whole process); 0: the
	// default, workflows.DefaultLongHeartbeatTimeout.
	LongHeartbeatTimeout time.Duration
}

// Main is a running worker: a Temporal worker with the workflows and activities
// registered. Close stops it.
type Main struct {
	worker worker.Worker
}

// Start registers the workflows and activities (each kind's: workerKinds, kinds.go)
// on a Temporal worker and starts polling
// the task queue; on a backend that checks nodes it also makes sure the node
// self-healing workflow runs.
func Start(ctx context.Context, cfg Config) (*Main, error) {
	if cfg.Backend == nil {
		return nil, errors.New("workers: Config.Backend is required")
	}
	if cfg.Temporal == nil || cfg.Events == nil {
		return nil, errors.New("workers: Config.Temporal and Config.Events are required")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = workflows.TaskQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LongHeartbeatTimeout != 0 {
		if err := workflows.SetLongHeartbeatTimeout(cfg.LongHeartbeatTimeout); err != nil {
			return nil, fmt.Errorf("workers: %w", err)
		}
	}
	tc, ev := cfg.Temporal, cfg.Events
	store, err := checkpoint.NewStore(cfg.S3)
	if err != nil {
		return nil, fmt.Errorf("workers: checkpoint store: %w", err)
	}
	w := worker.New(tc, cfg.TaskQueue, workerOptions(cfg))
	RegisterWorkflows(w)
	workspaces, err := auth.OpenWorkspaceReader(ctx, ev.JetStream())
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	tpls, err := templates.OpenStore(ctx, ev.JetStream())
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	d := &deps{cfg: cfg, tc: tc, ev: ev, store: store, workspaces: workspaces, templates: tpls}
	for _, k := range workerKinds {
		if k.activities == nil {
			continue
		}
		if err := k.activities(w, d); err != nil {
			return nil, err
		}
	}
	RegisterQuotaActivities(w, &activities.QuotaActivities{Client: tc, StartOptions: workflows.QuotaStartOptions})
	RegisterRunRecordActivities(w, &activities.RunRecordActivities{Store: cfg.Runs})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("workers: start: %w", err)
	}
	startNodeHealth(ctx, tc, cfg)
	return &Main{worker: w}, nil
}

// Close stops polling and waits for running activities to return.
func (m *Main) Close() {
	m.worker.Stop()
}

// templateReader adapts the templates store to activities.PipelineTemplateReader.
type templateReader struct{ s *templates.Store }

func (r templateReader) GetPipelineTemplate(ctx context.Context, ws, name string) (*schemas.StoredPipelineTemplate, bool, error) {
	t, err := r.s.Get(ctx, ws, name)
	if errors.Is(err, templates.ErrNotFound) || errors.Is(err, templates.ErrInvalidName) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return t, true, nil
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
