package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/failpoint"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/workflows"
)

// A worker that dies right after it committed a job's run record, before it could tell
// Temporal (a failpoint ends it with status 137, as SIGKILL would): the record is in
// the database, the job's workflow is still open, and the next worker retries the
// activity, which finds the record written and writes nothing more. The database then
// holds the run's record once.
func TestRunRecordWrittenOnceThroughAWorkerKill(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	e, stateDir, first := workerStack(t, ctx)
	first.kill() // the stack's first worker has no failpoint: this one has
	marks := t.TempDir()
	dying := startWorkerEnv(t, e, stateDir, "DLC_FAILPOINTS="+activities.FailpointAfterRunRecord, "DLC_FAILPOINTS_DIR="+marks)
	c := itest.AdminClient(t, e)
	const ws, name = "records", "once"
	job := itest.Submit(t, ctx, c, itest.ShellJob(ws, name, "echo trained"))

	// The failpoint ends the worker once the record is committed.
	exited := make(chan error, 1)
	go func() { exited <- dying.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		t.Fatal("the worker did not reach the failpoint")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != failpoint.ExitCode {
		t.Fatalf("the worker ended with %v, want exit status %d at the failpoint", err, failpoint.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(marks, activities.FailpointAfterRunRecord+".fired")); err != nil {
		t.Fatalf("the failpoint did not fire: %v", err)
	}
	store, err := runs.Open(ctx, e.RunsDatabase)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Get(ctx, ws, runs.KindJob, job.UID); err != nil {
		t.Fatalf("the record is not in the database after the worker died: %v", err)
	}
	tc, err := client.Dial(client.Options{HostPort: e.Stack.Temporal.Address, Namespace: e.Stack.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	desc, err := tc.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(ws, name), "")
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the job's workflow is %s when the worker died, want Running (the activity unanswered)", st)
	}

	// The next worker retries the activity and closes the workflow.
	startWorkerEnv(t, e, stateDir, "DLC_FAILPOINTS="+activities.FailpointAfterRunRecord, "DLC_FAILPOINTS_DIR="+marks)
	if err := tc.GetWorkflow(ctx, workflows.JobWorkflowID(ws, name), "").Get(ctx, nil); err != nil {
		t.Fatalf("the job's workflow: %v", err)
	}
	// The history says so: RecordRun's attempt that completed was a retry, and it
	// answered that it wrote nothing.
	attempt, result := recordRunOutcome(t, ctx, tc, workflows.JobWorkflowID(ws, name))
	if attempt < 2 || result.Written {
		t.Errorf("RecordRun completed on attempt %d with %+v, want a retry (attempt 2 or later) that wrote nothing", attempt, result)
	}
	page, err := store.List(ctx, runs.Query{Workspaces: []string{ws}, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].UID != job.UID || page.Records[0].Phase != "Succeeded" {
		t.Fatalf("records of job %s: %+v, want its one Succeeded run", name, page.Records)
	}
}

// recordRunOutcome reads a closed workflow's history for its RecordRun activity: the
// attempt that completed, and its result.
func recordRunOutcome(t *testing.T, ctx context.Context, tc client.Client, id string) (int32, activities.RecordRunResult) {
	t.Helper()
	var scheduled int64
	var attempt int32
	var result activities.RecordRunResult
	it := tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityRecordRun:
			scheduled = ev.GetEventId()
		case scheduled != 0 && ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == scheduled:
			attempt = ev.GetActivityTaskStartedEventAttributes().GetAttempt()
		case scheduled != 0 && ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == scheduled:
			p := ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			if len(p) != 1 || json.Unmarshal(p[0].GetData(), &result) != nil {
				t.Fatalf("RecordRun's result: %v", p)
			}
			return attempt, result
		}
	}
	t.Fatalf("workflow %s: no completed RecordRun in its history", id)
	return 0, result
}
