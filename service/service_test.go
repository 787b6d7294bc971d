package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// fakeTemporal records starts and listings; the calls it does not implement panic
// (the embedded interface is nil).
type fakeTemporal struct {
	client.Client
	startErr error
	started  []client.StartWorkflowOptions
	queries  []string
	queryErr error
	// tokens are the page tokens Temporal was given, one per listing.
	tokens [][]byte
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	f.started = append(f.started, o)
	if f.startErr != nil {
		return nil, f.startErr
	}
	return fakeRun{}, nil
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.queries = append(f.queries, req.Query)
	f.tokens = append(f.tokens, req.NextPageToken)
	return &workflowservice.ListWorkflowExecutionsResponse{NextPageToken: []byte("next")}, nil
}

func (f *fakeTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, f.queryErr
}

type fakeRun struct{ client.WorkflowRun }

func (fakeRun) GetRunID() string { return "run-1" }

func newTest(tc *fakeTemporal) *Service {
	return New(tc, "default", "q", slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func testJob() *schemas.TrainingJob {
	return &schemas.TrainingJob{Metadata: schemas.ObjectMeta{Name: "j1", Workspace: "alpha", Labels: map[string]string{"team": "a"}},
		Spec: schemas.TrainingJobSpec{Framework: "custom"}}
}

// A job starts with the options of workflows.JobStart, and a taken name is
// ErrAlreadyExists with the message users read.
func TestJobStart(t *testing.T) {
	tc := &fakeTemporal{}
	s := newTest(tc)
	job, err := s.Jobs.Start(context.Background(), testJob())
	if err != nil || job.UID != "run-1" || job.Status.Phase != schemas.JobPending {
		t.Fatalf("start: %+v, %v", job, err)
	}
	o := tc.started[0]
	if o.ID != workflows.JobWorkflowID("alpha", "j1") {
		t.Errorf("id %q", o.ID)
	}
	if o.TaskQueue != "q" || o.WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE ||
		o.WorkflowIDConflictPolicy != enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL || !o.WorkflowExecutionErrorWhenAlreadyStarted {
		t.Errorf("options %+v", o)
	}
	if o.TypedSearchAttributes.Size() != 6 {
		t.Errorf("%d search attributes, want 6", o.TypedSearchAttributes.Size())
	}
	if v, ok := o.TypedSearchAttributes.GetKeywordList(workflows.LabelsKey); !ok || !cmp.Equal(v, []string{"team=a"}) {
		t.Errorf("labels %v", v)
	}

	tc.startErr = serviceerror.NewWorkflowExecutionAlreadyStarted("taken", "", "")
	_, err = s.Jobs.Start(context.Background(), testJob())
	if !errors.Is(err, ErrAlreadyExists) || err.Error() != "job j1 already exists in workspace alpha; delete it first or choose another name" {
		t.Errorf("a taken name: %v", err)
	}
	tc.startErr = errors.New("down")
	if _, err = s.Jobs.Start(context.Background(), testJob()); err == nil || err.Error() != "start job: down" || errors.Is(err, ErrAlreadyExists) {
		t.Errorf("a failed start: %v", err)
	}
}

// Listings are one visibility query per kind, with the filters the kind has.
func TestListQueries(t *testing.T) {
	tc := &fakeTemporal{}
	s := newTest(tc)
	ctx := context.Background()
	o := ListOptions{Phase: "Running", Framework: "pytorch", Labels: []string{"team=a"}}
	if l, err := s.Jobs.List(ctx, "alpha", o); err != nil || l.NextPageToken == "" || l.NextPageToken == "next" || l.Items == nil {
		t.Fatalf("jobs: %+v %v", l, err)
	}
	if _, err := s.Experiments.List(ctx, "alpha", o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Schedules.List(ctx, "alpha", o); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`DlcKind = "TrainingJob" AND DlcWorkspace = "alpha" AND DlcPhase = "Running" AND DlcFramework = "pytorch" AND DlcLabels = "team=a"`,
		`DlcKind = "Experiment" AND DlcWorkspace = "alpha" AND DlcPhase = "Running" AND DlcLabels = "team=a"`,
		`DlcKind = "Schedule" AND DlcWorkspace = "alpha" AND ExecutionStatus = "Running"`,
	}
	if d := cmp.Diff(want, tc.queries); d != "" {
		t.Errorf("queries (-want +got):\n%s", d)
	}

	var se *Error
	_, err := s.Pipelines.List(ctx, "alpha", ListOptions{Labels: []string{"team"}})
	if !errors.As(err, &se) || !errors.Is(se.Kind, ErrInvalid) || se.Message != "invalid label filter" || se.Fields[0].Field != "label" {
		t.Errorf("a bad label: %v", err)
	}
	if _, err := ParseLimit("0"); !errors.Is(err, ErrInvalid) {
		t.Errorf("limit 0: %v", err)
	}
	if n, err := ParseLimit("1000"); n != 1000 || err != nil {
		t.Errorf("limit 1000: %d %v", n, err)
	}
}

// A missing object is ErrNotFound with the message users read.
func TestGetNotFound(t *testing.T) {
	tc := &fakeTemporal{queryErr: serviceerror.NewNotFound("no")}
	s := newTest(tc)
	_, err := s.Experiments.Get(context.Background(), "alpha", "e1")
	if !errors.Is(err, ErrNotFound) || err.Error() != "experiment e1 not found in workspace alpha" {
		t.Errorf("experiment: %v", err)
	}
	_, err = s.Pipelines.Get(context.Background(), "alpha", "p1")
	if !errors.Is(err, ErrNotFound) || err.Error() != "pipeline p1 not found in workspace alpha" {
		t.Errorf("pipeline: %v", err)
	}
}

// Deleting an experiment deletes every attempt's job of every trial.
func TestTrialJobs(t *testing.T) {
	view := api.ExperimentDetail{Spec: schemas.Experiment{Metadata: schemas.ObjectMeta{Name: "e"}},
		Status: schemas.ExperimentStatus{Trials: []schemas.TrialStatus{
			{ID: 0, Job: "e-t0", Attempts: 1},
			{ID: 1, Job: "e-t1-r2", Attempts: 3},
			{ID: 2, Job: "e-t2", Attempts: 0},
		}}}
	want := []string{"e-t0", "e-t1", "e-t1-r1", "e-t1-r2", "e-t2"}
	if d := cmp.Diff(want, trialJobs(view)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestStepJobs(t *testing.T) {
	job := &schemas.TrainingJobSpec{}
	view := api.PipelineRun{
		Spec: schemas.Pipeline{Metadata: schemas.ObjectMeta{Name: "p"},
			Spec: schemas.PipelineSpec{Steps: []schemas.PipelineStep{{Name: "a", Job: job}, {Name: "c"}, {Name: "b", Job: job}}}},
		Status: schemas.PipelineStatus{Steps: []schemas.StepStatus{{Name: "a", Job: "p-a"}, {Name: "c"}}},
	}
	want := []string{"p-a", "p-b"}
	if d := cmp.Diff(want, stepJobs(view)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// The token store's errors become the service's kinds with the messages the API has
// always answered.
func TestStoreError(t *testing.T) {
	list := schemas.ErrorList{schemas.Required(schemas.NewPath("name")), schemas.Required(schemas.NewPath("role"))}
	cases := []struct {
		err  error
		kind error
		msg  string
	}{
		{list, ErrInvalidObject, "create token: 2 problem(s)"},
		{fmt.Errorf("%w: token t", auth.ErrExists), ErrAlreadyExists, "token t already exists"},
		{fmt.Errorf("%w: workspace w", auth.ErrNotFound), ErrNotFound, "workspace w not found"},
	}
	for _, c := range cases {
		err := storeError("create token", c.err)
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, c.kind) || se.Message != c.msg {
			t.Errorf("storeError(%v) = %v, want %v %q", c.err, err, c.kind, c.msg)
		}
	}
	if err := storeError("list tokens", errors.New("boom")); err.Error() != "list tokens: boom" {
		t.Errorf("an internal failure: %v", err)
	}
	var se *Error
	if errors.As(storeError("create token", list), &se) && len(se.Fields) != 2 {
		t.Errorf("fields = %v, want 2", se.Fields)
	}
}
