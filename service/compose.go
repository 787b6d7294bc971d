package service

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/workflows"
)

// Config is what a process's services are composed from: Temporal, and the stores the
// optional services serve from. A process builds one Service from it (Compose) in its
// composition root (package app) and hands that one Service to every front end it
// runs: the API server, the trigger dispatcher and, through the API, the console. So
// every front end applies the same storage policy, page-token key and stores.
type Config struct {
	Temporal client.Client
	// Namespace is the Temporal namespace the services list and describe in; default
	// "default". TaskQueue is where they start workflows; default workflows.TaskQueue.
	Namespace string
	TaskQueue string
	Logger    *slog.Logger
	// Events is JetStream: the nodes' health events, the audit records (NewAudit),
	// the key that seals page tokens (NATSPageKey) and deleted jobs' records
	// (NewJobHistory). Nil: nodes are read from Temporal only, no audit is served,
	// page tokens are sealed with a key of this process, and a deleted job is gone.
	Events *jetstream.Client
	// Auth serves workspaces and tokens (NewWorkspaces, NewTokens); nil: neither.
	Auth *auth.Store
	// Triggers and Rules serve triggers and notification rules (NewTriggers,
	// NewRules); nil: not served.
	Triggers TriggerStore
	Rules    *notify.Store
	// Redriver, with Rules, serves the redrive of rules' dead letters (NewRedrives).
	Redriver *notify.Redriver
	// Templates serves stored pipeline templates (NewPipelineTemplates); nil: not
	// served.
	Templates TemplateStore
	// Storage, when set, confines the S3 locations of every document to its
	// workspace's (SetStorage).
	Storage *storage.Policy
	// LogArchive reads deleted jobs' archived logs (with Events); nil: the log stream
	// only.
	LogArchive *logarchive.Store
	// Runs is the run record database (package runs): purging a job, and deleting an
	// experiment or a pipeline run, removes their records (SetRunRecords). Nil: none.
	Runs runs.Store
}

// TriggerStore is the store of triggers (triggers.Store; this package cannot import
// triggers, whose dispatcher starts its actions through this package).
type TriggerStore = sentinelStore[*schemas.Trigger]

// historyOpenTimeout bounds opening deleted jobs' record when composing.
const historyOpenTimeout = 10 * time.Second

// Compose builds the services of cfg. A store that cannot be opened leaves its service
// out with a warning in the log, as a front end without it would be (deleted jobs'
// record); nothing else can fail.
func Compose(ctx context.Context, cfg Config) *Service {
	logger := cmp.Or(cfg.Logger, slog.Default())
	s := New(cfg.Temporal, cmp.Or(cfg.Namespace, "default"), cmp.Or(cfg.TaskQueue, workflows.TaskQueue), logger)
	if cfg.Auth != nil {
		s.Workspaces = NewWorkspaces(cfg.Auth, s)
		s.Tokens = NewTokens(cfg.Auth)
	}
	if cfg.Triggers != nil {
		s.Triggers = NewTriggers(cfg.Triggers)
	}
	if cfg.Rules != nil {
		s.Rules = NewRules(cfg.Rules)
	}
	if cfg.Redriver != nil {
		s.Redrives = NewRedrives(cfg.Redriver)
	}
	if cfg.Templates != nil {
		s.Templates = NewPipelineTemplates(cfg.Templates, s.Pipelines)
	}
	if cfg.Storage != nil {
		s.SetStorage(cfg.Storage)
	}
	if cfg.Runs != nil {
		s.SetRunRecords(cfg.Runs)
	}
	if cfg.Events != nil {
		s.Nodes = NewNodes(cfg.Temporal, cfg.Events)
		s.Audit = NewAudit(cfg.Events)
		s.SetPageKeySource(NATSPageKey(cfg.Events.JetStream()))
		hctx, cancel := context.WithTimeout(ctx, historyOpenTimeout)
		defer cancel()
		h, err := NewJobHistory(hctx, cfg.Events, cfg.LogArchive)
		if err != nil {
			logger.Warn("deleted jobs will be purged: cannot open their record", "error", err)
		} else {
			s.SetHistory(h)
		}
	}
	return s
}
