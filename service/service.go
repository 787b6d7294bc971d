// Package service is OpenDLC's domain layer: one service per kind (jobs, experiments,
// pipelines, schedules, triggers, rules; workspaces and tokens) with the operations the kind has (start, get, list, stop,
// delete...). It owns how each kind lives in Temporal: workflow ids, start options and
// search attributes (through workflows.StartSpec, shared with the workflows that start
// children), updates, queries and the visibility queries that list a kind.
//
// Methods take a context, a workspace and api/schemas values and return api values and
// errors of the kinds in errors.go. Nothing here knows HTTP: the API server
// (api/server) is one front end on top; it authenticates, authorizes and maps errors.
// The trigger dispatcher (triggers) is another: it starts jobs and pipeline runs here.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/workflows"
)

// Service holds the per-kind services over one Temporal namespace and task queue.
type Service struct {
	Jobs        *Jobs
	Experiments *Experiments
	Pipelines   *Pipelines
	Schedules   *Schedules
	Quotas      *Quotas
	// Nodes reads the nodes' health and releases quarantined nodes (nodes.go); the
	// front end gives it the events it reads (NewNodes).
	Nodes *Nodes
	// Triggers and Rules are set by the front end when it serves them (they need their
	// JetStream key-value stores): NewTriggers, NewRules.
	Triggers *Documents[*schemas.Trigger]
	Rules    *Documents[*schemas.NotificationRule]
	// Redrives sends rules' dead letters again; set with Rules (NewRedrives).
	Redrives *Redrives
	// Templates serves stored pipeline templates (NewPipelineTemplates); set by the
	// front end when it has their key-value store.
	Templates *PipelineTemplates
	// Workspaces and Tokens are set by the front end when it has a token store:
	// NewWorkspaces, NewTokens.
	Workspaces *Workspaces
	Tokens     *Tokens
	// Audit reads the audit stream (NewAudit); set with JetStream.
	Audit *Audit
}

// New returns the services using tc, in namespace, starting workflows on taskQueue.
func New(tc client.Client, namespace, taskQueue string, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	t := &temporalBase{tc: tc, namespace: namespace, taskQueue: taskQueue, log: logger, pages: newPageSealer(nil)}
	s := &Service{
		Jobs:        &Jobs{t},
		Experiments: &Experiments{temporalBase: t},
		Pipelines:   &Pipelines{temporalBase: t},
		Schedules:   &Schedules{t},
		Quotas:      &Quotas{t},
		Nodes:       NewNodes(tc, nil),
	}
	s.Experiments.jobs = s.Jobs
	s.Pipelines.jobs = s.Jobs
	return s
}

// temporalBase is what every kind's service shares.
type temporalBase struct {
	tc        client.Client
	namespace string
	taskQueue string
	log       *slog.Logger
	// storage, when set, confines documents' S3 URIs to their workspace (SetStorage).
	storage *storage.Policy
	// history, when set, keeps deleted jobs readable (job_history.go, SetHistory).
	history *JobHistory
	// pages seals the page tokens of listings (pagetoken.go).
	pages *pageSealer
	// records, when set, is the run record database (package runs): a purge removes a
	// job's records, a delete an experiment's or pipeline run's (SetRunRecords).
	records runs.Store
}

// start starts spec's workflow, listed under ctx's owner (DlcOwner, WithOwner); a
// taken id is ErrAlreadyExists with the message exists.
func (t *temporalBase) start(ctx context.Context, spec workflows.StartSpec, what, exists string) (client.WorkflowRun, error) {
	spec = withOwnerAttr(ctx, spec)
	run, err := t.tc.ExecuteWorkflow(ctx, spec.ClientOptions(t.taskQueue), spec.WorkflowType, spec.Input)
	if err != nil {
		if isAlreadyStarted(err) {
			return nil, &Error{Kind: ErrAlreadyExists, Message: exists}
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return run, nil
}

// ListOptions select one page of a listing.
type ListOptions struct {
	// Limit is the page size, 1 to 1000; 0 means 100.
	Limit int
	// PageToken is the previous page's NextPageToken.
	PageToken string
	// Phase, when set, keeps only objects in that phase.
	Phase string
	// Framework, when set, keeps only jobs of that framework.
	Framework string
	// Labels are key=value filters, all of which must match.
	Labels []string
}

// ParseLimit reads a page size as given by a user: empty is 0 (the default).
func ParseLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, invalid("invalid limit", "limit", "must be an integer between 1 and 1000")
	}
	return n, nil
}

// list lists one page of a workspace's workflows of kind from Temporal visibility.
// filters says whether the phase, framework and label options apply; extra, when set,
// is one more clause.
func (t *temporalBase) list(ctx context.Context, ws string, kind schemas.Kind, o ListOptions, filters bool, extra string) ([]*workflow.WorkflowExecutionInfo, string, error) {
	if o.Limit != 0 && (o.Limit < 1 || o.Limit > 1000) {
		return nil, "", invalid("invalid limit", "limit", "must be an integer between 1 and 1000")
	}
	pageSize := o.Limit
	if pageSize == 0 {
		pageSize = 100
	}
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.SearchAttrKind, string(kind), workflows.SearchAttrWorkspace, ws)
	if extra != "" {
		query += " AND " + extra
	}
	if filters {
		if o.Phase != "" {
			query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrPhase, o.Phase)
		}
		if o.Framework != "" {
			query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrFramework, o.Framework)
		}
		var labelFilters strings.Builder
		for _, l := range o.Labels {
			if !strings.Contains(l, "=") {
				return nil, "", invalid("invalid label filter", "label", "must be key=value")
			}
			labelFilters.WriteString(fmt.Sprintf(" AND %s = %q", workflows.SearchAttrLabels, l))
		}
		query += labelFilters.String()
	}
	// The page token is the client's: it reaches Temporal only once its MAC shows that
	// this listing issued it (pagetoken.go).
	scope := t.namespace + "\x00" + query
	token, err := t.pages.open(ctx, scope, o.PageToken)
	if err != nil {
		return nil, "", err
	}
	resp, err := t.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace:     t.namespace,
		PageSize:      int32(pageSize),
		NextPageToken: token,
		Query:         query,
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %ss: %w", strings.ToLower(string(kind)), err)
	}
	return resp.Executions, t.pages.seal(ctx, scope, resp.NextPageToken), nil
}

// summary reads the name and phase search attributes of a listed execution.
func summary(e *workflow.WorkflowExecutionInfo) (name, phase string) {
	dc := converter.GetDefaultDataConverter()
	fields := e.GetSearchAttributes().GetIndexedFields()
	_ = dc.FromPayload(fields[workflows.SearchAttrName], &name)
	_ = dc.FromPayload(fields[workflows.SearchAttrPhase], &phase)
	return name, phase
}

// listedRun is what a listing shows of one execution of a kind whose phases are P.
type listedRun[P ~string] struct {
	Name, UID string
	Start     time.Time
	// End is set once the execution has closed.
	End   *time.Time
	Phase P
	// Framework is a job's framework; empty for other kinds.
	Framework string
}

// runKind says how to list the executions of one kind as runs.
type runKind[P ~string] struct {
	kind schemas.Kind
	// final are the phases a closed execution may end in; one that closed in another
	// phase was terminated by an operator and is listed as failed.
	final  func(P) bool
	failed P
	// current lists an execution that continued as new once, by its current run.
	current bool
}

// listRuns answers one page of a workspace's runs of kind k, newest first, each made a
// summary by sum. The Framework filter applies to jobs only.
func listRuns[P ~string, S any](ctx context.Context, t *temporalBase, ws string, o ListOptions, k runKind[P],
	sum func(listedRun[P]) S) ([]S, string, error) {
	if k.kind != schemas.KindTrainingJob {
		o.Framework = ""
	}
	execs, next, err := t.list(ctx, ws, k.kind, o, true, "")
	if err != nil {
		return nil, "", err
	}
	items := []S{}
	for _, e := range execs {
		if k.current && e.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			continue
		}
		items = append(items, sum(listed(e, k.final, k.failed)))
	}
	return items, next, nil
}

// listed reads a listed execution: its name and phase search attributes, run id, start
// and end. A closed execution whose phase is not final (final) was terminated by an
// operator: its phase is failed.
func listed[P ~string](e *workflow.WorkflowExecutionInfo, final func(P) bool, failed P) listedRun[P] {
	name, phase := summary(e)
	r := listedRun[P]{Name: name, UID: e.GetExecution().GetRunId(), Start: e.GetStartTime().AsTime(), Phase: P(phase)}
	_ = converter.GetDefaultDataConverter().FromPayload(e.GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrFramework], &r.Framework)
	if e.GetCloseTime() != nil {
		t := e.GetCloseTime().AsTime()
		r.End = &t
		if !final(r.Phase) {
			r.Phase = failed
		}
	}
	return r
}

// deleteExecution deletes one execution (terminating it if it runs).
func (t *temporalBase) deleteExecution(ctx context.Context, e *commonpb.WorkflowExecution) error {
	_, err := t.tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace:         t.namespace,
		WorkflowExecution: e,
	})
	if err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// waitDeleted polls until the execution is gone, for at most 30 seconds: Temporal
// deletes asynchronously, and a get or a new start with the same name right after a
// delete must behave as the user expects.
func (t *temporalBase) waitDeleted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := t.tc.DescribeWorkflowExecution(ctx, id, "")
		if isNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still exists after delete: %w", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteRuns deletes every execution with a workflow id (a workflow that continued as
// new has several).
func (t *temporalBase) deleteRuns(ctx context.Context, id string) error {
	var token []byte
	for {
		resp, err := t.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.namespace, PageSize: 100, NextPageToken: token,
			Query: fmt.Sprintf("WorkflowId = %q", id),
		})
		if err != nil {
			return err
		}
		for _, e := range resp.Executions {
			if err := t.deleteExecution(ctx, e.GetExecution()); err != nil {
				return err
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return nil
		}
	}
}

// Temporal is the client the services start workflows with, and TaskQueue where: the
// trigger dispatcher signals its triggers' gates with them (package triggers).
func (s *Service) Temporal() (c client.Client, taskQueue string) {
	return s.Jobs.tc, s.Jobs.taskQueue
}
