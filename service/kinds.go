package service

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A kind registers with the service layer once, here: the service that holds its
// operations, and whether a workspace's objects of the kind keep it from being deleted
// (Workspaces.Delete, access.go). TestEveryKindHasAService ranges over schemas.Kinds()
// and fails for a kind missing here.

// kindService is a kind's registration with the service layer.
type kindService struct {
	kind schemas.Kind
	// service is the kind's service in a Service (New, and the front end's NewTriggers
	// and NewRules).
	service func(*Service) any
	// holds says whether, and while what, a workspace holds the kind's objects.
	holds holds
}

// holds says whether a workspace's objects of a kind keep it from being deleted. Every
// kind says so: heldBy (its workflows, those live) or notHeld (why not).
type holds struct {
	// held: a workspace is deleted only once it holds none of the kind's executions...
	held bool
	// live, when set, is the visibility clause selecting the live ones among them
	// (Workspaces.holds); "" counts every execution.
	live string
	// notHeld says why the kind's objects do not keep their workspace.
	notHeld string
}

// heldBy says that a workspace holds the kind while it has executions of it that live
// selects (a visibility clause; "" selects them all).
func heldBy(live string) holds { return holds{held: true, live: live} }

// notHeld says that the kind's objects do not keep their workspace from being deleted,
// and why.
func notHeld(why string) holds { return holds{notHeld: why} }

// serviceKinds are the kinds the service layer serves, in the order a refusal to delete
// a workspace names them.
var serviceKinds = registerServiceKinds(
	// Jobs, experiments and pipeline runs exist until they are deleted, finished or
	// not.
	kindService{kind: schemas.KindTrainingJob, service: func(s *Service) any { return s.Jobs }, holds: heldBy("")},
	kindService{kind: schemas.KindExperiment, service: func(s *Service) any { return s.Experiments }, holds: heldBy("")},
	kindService{kind: schemas.KindPipeline, service: func(s *Service) any { return s.Pipelines }, holds: heldBy("")},
	// A schedule's runs that continued as new are closed; its live run runs.
	kindService{kind: schemas.KindSchedule, service: func(s *Service) any { return s.Schedules }, holds: heldBy(`ExecutionStatus = "Running"`)},
	kindService{kind: schemas.KindTrigger, service: func(s *Service) any { return s.Triggers },
		holds: notHeld("a trigger is a key-value document, not a workflow; what it started is held as its own kind")},
	kindService{kind: schemas.KindNotificationRule, service: func(s *Service) any { return s.Rules },
		holds: notHeld("a rule is a key-value document and starts nothing")},
	kindService{kind: schemas.KindPipelineTemplate, service: func(s *Service) any { return s.Templates },
		holds: notHeld("a pipeline template is a key-value document; its runs are held as pipelines")},
)

// registerServiceKinds refuses a registration that misses a part: the package does not
// load, and its tests say why.
func registerServiceKinds(ks ...kindService) []kindService {
	for _, k := range ks {
		if err := k.check(); err != nil {
			panic("service: " + err.Error())
		}
	}
	return ks
}

// check names what a registration misses.
func (k kindService) check() error {
	var errs []error
	if k.service == nil {
		errs = append(errs, fmt.Errorf("kind %s registers no service", k.kind))
	}
	switch {
	case k.holds.held && k.holds.notHeld != "":
		errs = append(errs, fmt.Errorf("kind %s is both held by its workspace and not", k.kind))
	case !k.holds.held && k.holds.notHeld == "":
		errs = append(errs, fmt.Errorf("kind %s does not say whether its objects keep a workspace from being deleted (holds: heldBy(live clause) or notHeld(why))", k.kind))
	}
	if _, ok := schemas.Info(k.kind); !ok {
		errs = append(errs, fmt.Errorf("kind %s is not in schemas.Kinds() (schemas/kinds.go)", k.kind))
	}
	return errors.Join(errs...)
}

// queryView asks workflow id for its status view (a V) and answers it converted to
// the kind's api value.
func queryView[V, R any](ctx context.Context, tc client.Client, id string, conv func(V) R) (R, error) {
	var zero R
	v, err := tc.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return zero, err
	}
	var view V
	if err := v.Get(&view); err != nil {
		return zero, err
	}
	return conv(view), nil
}

// getView is Get for every kind: the view query answers, a missing workflow is the
// kind's not-found error.
func getView[R any](ctx context.Context, kind, ws, name string, query func(context.Context, string, string) (R, error)) (R, error) {
	view, err := query(ctx, ws, name)
	if err != nil {
		var zero R
		if isNotFound(err) {
			return zero, notFound(kind, ws, name)
		}
		return zero, fmt.Errorf("query %s: %w", kind, err)
	}
	return view, nil
}

// describe describes workflow id, the one workspace ws's kind object name runs; a
// missing workflow is the kind's not-found error.
func (t *temporalBase) describe(ctx context.Context, kind, ws, name, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	desc, err := t.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(kind, ws, name)
		}
		return nil, fmt.Errorf("describe %s: %w", kind, err)
	}
	return desc, nil
}

// parentDelete is what deleteWithJobs needs of a kind whose workflow runs jobs (an
// experiment's trials, a pipeline's steps).
type parentDelete[R any] struct {
	kind   string    // "experiment", "pipeline"
	record runs.Kind // the kind of its run records
	child  string    // how its jobs are named in errors: "trial job", "step job"
	// query answers the object's view; stop stops it; jobs names the jobs the view ran.
	query func(context.Context, string, string) (R, error)
	stop  func(context.Context, string, string) error
	jobs  func(R) []string
}

// deleteWithJobs deletes an object whose workflow (id) runs jobs, and its jobs, so
// that its name can be used again; it returns once they are gone. A running object is
// stopped first, then its workflow terminated (its jobs are stopped, as deleting a job
// stops it), then its execution (every run of id) and the jobs its view names are
// deleted.
func deleteWithJobs[R any](ctx context.Context, t *temporalBase, jobs *Jobs, p parentDelete[R], ws, name, id string) error {
	desc, err := t.describe(ctx, p.kind, ws, name, id)
	if err != nil {
		return err
	}
	view, err := p.query(ctx, ws, name)
	if err != nil {
		return fmt.Errorf("query %s before delete: %w", p.kind, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if err := p.stop(ctx, ws, name); err != nil {
			return fmt.Errorf("stop %s before delete: %w", p.kind, err)
		}
		if err := t.tc.TerminateWorkflow(ctx, id, "", p.kind+" deleted"); err != nil && !isNotFound(err) {
			return fmt.Errorf("terminate %s: %w", p.kind, err)
		}
	}
	if err := t.deleteRuns(ctx, id); err != nil {
		return fmt.Errorf("delete %s: %w", p.kind, err)
	}
	for _, job := range p.jobs(view) {
		if err := jobs.Delete(ctx, ws, job, DeleteOptions{Purge: true}); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete %s %s: %w", p.child, job, err)
		}
	}
	if err := t.waitDeleted(ctx, id); err != nil {
		return fmt.Errorf("delete %s: %w", p.kind, err)
	}
	return t.deleteRecords(ctx, p.record, ws, name, "")
}

// jobNames collects job names in order, each once, leaving out empty ones.
type jobNames struct {
	seen map[string]bool
	out  []string
}

func (j *jobNames) add(n string) {
	if n == "" || j.seen[n] {
		return
	}
	if j.seen == nil {
		j.seen = map[string]bool{}
	}
	j.seen[n] = true
	j.out = append(j.out, n)
}
