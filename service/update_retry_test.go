package service

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// failingTask makes flakyJob's workflow tasks fail while it is set.
var failingTask atomic.Bool

// flakyJob stands in for the TrainingJob workflow: its workflow task fails (a panic,
// which the SDK reports as a failed workflow task and the server retries) while
// failingTask is set, as a large job's task did on a loaded worker; once a task
// completes it takes the stop update and ends Stopped.
func flakyJob(ctx workflow.Context, _ workflows.TrainingJobInput) (workflows.TrainingJobResult, error) {
	if failingTask.Load() {
		panic("test: this workflow task fails")
	}
	stopped := false
	if err := workflow.SetUpdateHandler(ctx, workflows.UpdateStop, func(workflow.Context, workflows.StopRequest) (workflows.StopResult, error) {
		stopped = true
		return workflows.StopResult{Phase: schemas.JobStopped}, nil
	}); err != nil {
		return workflows.TrainingJobResult{}, err
	}
	if err := workflow.Await(ctx, func() bool { return stopped && workflow.AllHandlersFinished(ctx) }); err != nil {
		return workflows.TrainingJobResult{}, err
	}
	return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobStopped}}, nil
}

// refusalCounter is a real Temporal client that counts the updates the server refused
// as not ready.
type refusalCounter struct {
	client.Client
	refused atomic.Int32
}

func (c *refusalCounter) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	h, err := c.Client.UpdateWorkflow(ctx, o)
	if isNotReady(err) {
		c.refused.Add(1)
	}
	return h, err
}

// A stop sent while the job's workflow task is failing is asked again until a task
// completes, instead of passing the server's "Workflow Task in failed state" refusal
// on; on a real Temporal dev server.
func TestStopWhileWorkflowTaskFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := client.Dial(client.Options{HostPort: tmp.Address, Namespace: tmp.Namespace, Logger: sdklog.NewStructuredLogger(quiet)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	const queue = "stop-retry"
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(flakyJob, workflow.RegisterOptions{Name: workflows.TrainingJobWorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	counted := &refusalCounter{Client: tc}
	s := New(counted, tmp.Namespace, queue, quiet)
	failingTask.Store(true)
	defer failingTask.Store(false)
	job := testJob()
	if _, err := s.Jobs.Start(ctx, job); err != nil {
		t.Fatal(err)
	}
	ws, name := job.Metadata.Workspace, job.Metadata.Name

	// The fault: the task fails again and again, and the server refuses updates.
	waitFor(t, ctx, "the server to refuse an update while the workflow task fails", func() bool {
		uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
		defer ucancel()
		_, err := tc.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
			WorkflowID: workflows.JobWorkflowID(ws, name), UpdateName: workflows.UpdateStop,
			Args: []any{workflows.StopRequest{}}, WaitForStage: client.WorkflowUpdateStageAccepted,
		})
		return isNotReady(err)
	})
	if n := failedTasks(t, ctx, tc, workflows.JobWorkflowID(ws, name)); n == 0 {
		t.Fatal("no WorkflowTaskFailed event in the history")
	}

	type stopped struct {
		res api.StopResult
		err error
	}
	done := make(chan stopped, 1)
	go func() {
		res, err := s.Jobs.Stop(ctx, ws, name, api.StopRequest{Reason: "test"})
		done <- stopped{res, err}
	}()
	// Stop was refused at least once before the task is let to succeed.
	waitFor(t, ctx, "Stop to be refused as not ready", func() bool { return counted.refused.Load() > 0 })
	failingTask.Store(false)
	select {
	case r := <-done:
		if r.err != nil || r.res.Phase != schemas.JobStopped {
			t.Fatalf("stop: %+v, %v", r.res, r.err)
		}
		t.Logf("stop answered %s after %d refusals", r.res.Phase, counted.refused.Load())
	case <-ctx.Done():
		t.Fatal("stop did not answer")
	}
}

// A stop whose context ends while the task still fails answers the refusal.
func TestStopNotReadyUntilDeadline(t *testing.T) {
	tc := &notReadyTemporal{fakeTemporal: fakeTemporal{queryErr: serviceerror.NewWorkflowNotReady("not ready")}}
	s := New(tc, "default", "q", slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := s.Jobs.Stop(ctx, "alpha", "j1", api.StopRequest{})
	if !isNotReady(err) || tc.updates.Load() < 2 {
		t.Fatalf("stop: %v after %d updates", err, tc.updates.Load())
	}
}

// notReadyTemporal refuses every update as not ready, and every query too.
type notReadyTemporal struct {
	fakeTemporal
	updates atomic.Int32
}

func (f *notReadyTemporal) UpdateWorkflow(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.updates.Add(1)
	return nil, serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to Workflow Task in failed state.")
}

// failedTasks counts the WorkflowTaskFailed events of a workflow's history.
func failedTasks(t *testing.T, ctx context.Context, tc client.Client, id string) int {
	t.Helper()
	n := 0
	it := tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			n++
		}
	}
	return n
}

// waitFor polls cond every 100 ms until it holds, or fails the test when ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	testutil.Eventually(t, timeout, what, cond, 100*time.Millisecond)
}
