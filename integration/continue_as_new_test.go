package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	dlc "github.com/opendlc/opendlc/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// historyBounds is the test knob of the history bounds: a worker interceptor that sets
// TrainingJobInput.HistoryBound (QuotaView.HistoryBound) for the jobs (workspace
// quotas) whose workflow id is registered with lower, before the workflow sees its
// input. It is installed with the worker in setup.
var historyBounds = &historyBoundsInterceptor{bounds: map[string]workflows.HistoryBound{}}

type historyBoundsInterceptor struct {
	interceptor.WorkerInterceptorBase
	mu     sync.Mutex
	bounds map[string]workflows.HistoryBound // by workflow id
}

// lower sets the history bound of the job or quota workflow id (every run of it).
func (h *historyBoundsInterceptor) lower(id string, b workflows.HistoryBound) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bounds[id] = b
}

func (h *historyBoundsInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &boundedJob{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, h: h}
}

type boundedJob struct {
	interceptor.WorkflowInboundInterceptorBase
	h *historyBoundsInterceptor
}

func (b *boundedJob) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	info := workflow.GetInfo(ctx)
	if len(in.Args) == 1 {
		b.h.mu.Lock()
		bound, ok := b.h.bounds[info.WorkflowExecution.ID]
		b.h.mu.Unlock()
		switch arg := in.Args[0].(type) {
		case workflows.TrainingJobInput:
			if ok {
				arg.HistoryBound = &bound
				in.Args[0] = arg
			}
		case workflows.QuotaView: // a workspace quota (workflows.QuotaWorkflowID)
			if ok {
				arg.HistoryBound = &bound
				in.Args[0] = arg
			}
		}
	}
	return b.Next.ExecuteWorkflow(ctx, in)
}

// jobRun is one run of a job's workflow chain, as the Temporal server recorded it.
type jobRun struct {
	runID         string
	events, bytes int
	next          string // the run it continued as; "" for the last
}

// jobRuns follows a job's chain of runs from the first (the job's uid).
func jobRuns(t *testing.T, ctx context.Context, id, firstRun string) []jobRun {
	t.Helper()
	var runs []jobRun
	for run := firstRun; run != "" && len(runs) < 100; {
		r := jobRun{runID: run}
		it := env.temporal.GetWorkflowHistory(ctx, id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of run %s: %v", run, err)
			}
			r.events++
			r.bytes += ev.Size()
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				r.next = a.GetNewExecutionRunId()
			}
		}
		runs = append(runs, r)
		run = r.next
	}
	return runs
}

// A real job whose history bound is lowered to one event continues as new after
// every gang watch while it runs: it still succeeds, with one status event per phase
// (none lost or repeated at a boundary), its status and attempt history whole, and
// every log line forwarded once although each run restarts the log forwarder.
func TestJobContinuesAsNew(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	const name = "long"
	historyBounds.lower(workflows.JobWorkflowID(ws, name), workflows.HistoryBound{MaxEvents: 1})
	// Each replica writes 20 lines, then replica i lives 2i s more: the gang changes
	// (and the job continues as new) while the replicas still write.
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: custom
  command: [/bin/sh, -c, 'i=0; while [ $i -lt 20 ]; do echo "line $i of $DLC_REPLICA"; i=$((i+1)); sleep 0.2; done; sleep $((DLC_REPLICA * 2))']
  roles:
    worker: {replicas: 3, resources: {cpu: 100m, memory: 64Mi}}
  timeout: 5m
`, name, ws))

	j := waitTerminal(t, ctx, ws, name)
	st := j.Status
	if st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase = %s (%s: %s), want Succeeded", st.Phase, st.Reason, st.Message)
	}

	// The job really continued as new: its chain has more than one run.
	runs := jobRuns(t, ctx, workflows.JobWorkflowID(ws, name), j.UID)
	for i, r := range runs {
		t.Logf("run %d (%s): %d events, %d bytes", i, r.runID, r.events, r.bytes)
	}
	if len(runs) < 2 {
		t.Fatalf("the job ran in %d run(s), want it to continue as new at least once", len(runs))
	}
	// The second run starts from a handed-over attempt and, when the job continued
	// more than once, hands it over again: the history that pins both.
	itest.RecordRunHistory(t, ctx, func() client.Client { return env.temporal }, workflows.JobWorkflowID(ws, name),
		runs[1].runID, "training_job_continued_as_new.json")

	// Status: every phase once, in order; one attempt, which succeeded; every replica
	// succeeded.
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phaseList(st)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if len(st.Attempts) != 1 || st.Attempts[0].Outcome != schemas.JobSucceeded || st.Attempts[0].RunningTime == nil {
		t.Errorf("attempts = %+v, want one that ran and succeeded", st.Attempts)
	}
	if len(st.Replicas) != 3 {
		t.Fatalf("replicas = %+v, want 3", st.Replicas)
	}
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaSucceeded {
			t.Errorf("replica %s: %s", r.Name, r.Phase)
		}
	}

	// Status events: one per transition, numbered 1..4 across the runs, under the
	// first run's uid.
	evs := statusEvents(t, ctx, ws, name)
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phasesOf(evs)); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	for i, e := range evs {
		if e.Seq != i+1 || e.UID != j.UID {
			t.Errorf("status event %d: seq %d uid %s, want seq %d uid %s", i, e.Seq, e.UID, i+1, j.UID)
		}
	}

	// Logs: each replica's 20 lines, each once, in order.
	lines := map[string][]string{}
	for _, r := range jobLogs(t, ctx, ws, name) {
		lines[r.Replica] = append(lines[r.Replica], strings.TrimSpace(r.Line))
	}
	for i := range 3 {
		var want []string
		for k := range 20 {
			want = append(want, fmt.Sprintf("line %d of %d", k, i))
		}
		replica := fmt.Sprintf("%s-worker-%d-a0", name, i)
		if diff := cmp.Diff(want, lines[replica]); diff != "" {
			t.Errorf("log of %s (-want +got):\n%s", replica, diff)
		}
	}
	if got := slices.Sorted(maps.Keys(lines)); len(got) != 3 {
		t.Errorf("logs of replicas %v, want 3", got)
	}

	// The list names the job once, though its chain has several runs; a default delete
	// hides it from the list and from Get, and it stays readable by its uid.
	if n := listedJobs(t, ctx, ws, name); n != 1 {
		t.Errorf("the job is listed %d times, want once", n)
	}
	if err := env.api.DeleteJob(ctx, ws, name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n := listedJobs(t, ctx, ws, name); n != 0 {
		t.Errorf("after delete the job is listed %d times, want 0", n)
	}
	if _, err := env.api.GetJob(ctx, ws, name); err == nil {
		t.Error("after delete, Get by name found the job")
	}
	if run, err := env.api.GetJobRun(ctx, ws, name, j.UID); err != nil || run.Status.Phase != schemas.JobSucceeded {
		t.Errorf("after delete, the run by uid = %+v, %v; want it Succeeded", run, err)
	}
}

// listedJobs counts the entries named name in the workspace's job list.
func listedJobs(t *testing.T, ctx context.Context, ws, name string) int {
	t.Helper()
	l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	n := 0
	for _, it := range l.Items {
		if it.Name == name {
			n++
		}
	}
	return n
}
