package service

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/workflows"
)

// nameTemporal is a Temporal client on which job j1's name was taken by a run that
// ended (closed) or still runs; a start fails while the name is taken and the reuse
// policy rejects duplicates.
type nameTemporal struct {
	fakeTemporal
	taken     bool
	status    enums.WorkflowExecutionStatus
	uid       string
	describes int
}

func (f *nameTemporal) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, w any, args ...any) (client.WorkflowRun, error) {
	f.startErr = nil
	if f.taken && o.WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		f.startErr = serviceerror.NewWorkflowExecutionAlreadyStarted("taken", "", "")
	}
	return f.fakeTemporal.ExecuteWorkflow(ctx, o, w, args...)
}

func (f *nameTemporal) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.describes++
	if !f.taken {
		return nil, serviceerror.NewNotFound("no such workflow")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{Status: f.status},
	}, nil
}

func (f *nameTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(workflows.JobView{UID: f.uid})
	if err != nil {
		return nil, err
	}
	return client.NewValue(p), nil
}

// A new name is started with one call to Temporal, without looking for a previous run
// first; a taken name is looked at, and started again only when its run was deleted.
func TestJobStartLooksAtTakenNamesOnly(t *testing.T) {
	ctx := context.Background()
	history := func(deleted ...string) *JobHistory {
		h := &JobHistory{cache: map[string]bool{}, ready: true}
		for _, uid := range deleted {
			h.cache[deletedKey("alpha", uid)] = true
		}
		return h
	}

	tc := &nameTemporal{}
	s := newTest(&tc.fakeTemporal)
	s.Jobs.tc = tc
	s.SetHistory(history())
	if _, err := s.Jobs.Start(ctx, testJob()); err != nil {
		t.Fatalf("a new name: %v", err)
	}
	if len(tc.started) != 1 || tc.describes != 0 {
		t.Errorf("a new name: %d starts and %d describes, want 1 and 0", len(tc.started), tc.describes)
	}

	for _, c := range []struct {
		name    string
		status  enums.WorkflowExecutionStatus
		deleted bool
		starts  int
		err     error
	}{
		{"running", enums.WORKFLOW_EXECUTION_STATUS_RUNNING, false, 1, ErrAlreadyExists},
		{"ended, kept", enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, false, 1, ErrAlreadyExists},
		{"ended, deleted", enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, true, 2, nil},
	} {
		tc := &nameTemporal{taken: true, status: c.status, uid: "old"}
		s := newTest(&tc.fakeTemporal)
		s.Jobs.tc = tc
		var deleted []string
		if c.deleted {
			deleted = append(deleted, "old")
		}
		s.SetHistory(history(deleted...))
		_, err := s.Jobs.Start(ctx, testJob())
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
		if len(tc.started) != c.starts || tc.describes != 1 {
			t.Errorf("%s: %d starts and %d describes, want %d and 1", c.name, len(tc.started), tc.describes, c.starts)
		}
		if c.deleted && tc.started[1].WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
			t.Errorf("%s: the second start's reuse policy is %s", c.name, tc.started[1].WorkflowIDReusePolicy)
		}
		if err != nil && err.Error() != "job j1 already exists in workspace alpha; delete it first or choose another name" {
			t.Errorf("%s: message %q", c.name, err)
		}
	}
}
