package workers

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/templates"
	"github.com/opendlc/opendlc/workflows"
)

// A kind registers with the worker once, here: the workflow that runs each of its
// objects, under its wire name, and the activities that workflow calls, made from what
// the worker has (deps). A kind whose objects no workflow runs says what runs them
// instead. TestEveryKindHasAWorker ranges over schemas.Kinds() and fails for a kind
// missing here. The workflows of no kind (the quota, node health) are in register.go.

// kindWorker is a kind's registration with the worker.
type kindWorker struct {
	kind schemas.Kind
	// workflow runs one object of the kind; name is its wire name, which recorded
	// histories name and never changes.
	workflow any
	name     string
	// activities registers the activities the workflow calls.
	activities func(ActivityRegistry, *deps) error
	// elsewhere, set instead of the above, says what runs the kind's objects.
	elsewhere string
}

// deps are what the kinds' activities are made of; Start assembles them once.
type deps struct {
	cfg        Config
	tc         client.Client
	ev         *jetstream.Client
	store      *checkpoint.Store
	workspaces *auth.WorkspaceReader
	templates  *templates.Store
}

// workerKinds are the kinds the worker runs.
var workerKinds = registerWorkerKinds(
	kindWorker{kind: schemas.KindTrainingJob, workflow: workflows.TrainingJobWorkflow, name: workflows.TrainingJobWorkflowName,
		activities: func(r ActivityRegistry, d *deps) error {
			RegisterActivities(r, &activities.JobActivities{
				Backend:     d.cfg.Backend,
				Publisher:   d.ev,
				Checkpoints: checkpointFinder{d.store},
				Workspaces:  d.workspaces,
				Storage:     &storage.Policy{Root: d.cfg.StorageRoot, Workspaces: d.workspaces},
				LogStream:   jetstream.LogsStream,
				Events:      d.ev,
				EventStream: jetstream.EventsStream,
				Metrics:     d.cfg.Metrics,

				MetricObjects: d.store,

				HeartbeatBudget:  d.cfg.HeartbeatBudget,
				ResourceInterval: d.cfg.ResourceInterval,
			})
			return registerLogArchive(r, d.cfg, d.workspaces)
		}},
	kindWorker{kind: schemas.KindExperiment, workflow: workflows.ExperimentWorkflow, name: workflows.ExperimentWorkflowName,
		activities: func(r ActivityRegistry, d *deps) error {
			RegisterExperimentActivities(r, &activities.ExperimentActivities{Events: d.ev, EventStream: jetstream.EventsStream, Temporal: d.tc, Experiments: d.tc})
			return nil
		}},
	kindWorker{kind: schemas.KindPipeline, workflow: workflows.PipelineWorkflow, name: workflows.PipelineWorkflowName,
		activities: func(r ActivityRegistry, d *deps) error {
			RegisterPipelineActivities(r, &activities.PipelineActivities{Workflows: d.tc, Events: d.ev, EventsStream: jetstream.EventsStream})
			return nil
		}},
	kindWorker{kind: schemas.KindSchedule, workflow: workflows.ScheduleWorkflow, name: workflows.ScheduleWorkflowName,
		activities: func(r ActivityRegistry, d *deps) error {
			RegisterScheduleActivities(r, &activities.ScheduleActivities{Objects: d.store, Jobs: jobControl{d.tc}, Templates: templateReader{d.templates},
				Storage: &storage.Policy{Root: d.cfg.StorageRoot, Workspaces: d.workspaces}})
			return nil
		}},
	kindWorker{kind: schemas.KindTrigger,
		elsewhere: "the trigger dispatcher (package triggers) starts the job, pipeline or experiment a trigger names"},
	kindWorker{kind: schemas.KindNotificationRule,
		elsewhere: "the notification dispatcher (package notify) sends what a rule matches"},
	kindWorker{kind: schemas.KindPipelineTemplate,
		elsewhere: "a pipeline template is a stored document: its runs are Pipeline workflows, started by the API, the trigger dispatcher or a schedule"},
)

// registerWorkerKinds refuses a registration that misses a part: the package does not
// load, and its tests say why.
func registerWorkerKinds(ks ...kindWorker) []kindWorker {
	for _, k := range ks {
		if err := k.check(); err != nil {
			panic("workers: " + err.Error())
		}
	}
	return ks
}

// check names what a registration misses.
func (k kindWorker) check() error {
	var errs []error
	switch {
	case k.elsewhere != "" && (k.workflow != nil || k.activities != nil):
		errs = append(errs, fmt.Errorf("kind %s registers a workflow and says something else runs it", k.kind))
	case k.elsewhere != "":
	case k.workflow == nil:
		errs = append(errs, fmt.Errorf("kind %s registers no workflow (or, if none runs its objects, what does: elsewhere)", k.kind))
	default:
		if k.name == "" {
			errs = append(errs, fmt.Errorf("kind %s registers its workflow without a wire name", k.kind))
		}
		if k.activities == nil {
			errs = append(errs, fmt.Errorf("kind %s registers no activities for its workflow", k.kind))
		}
	}
	return errors.Join(errs...)
}
