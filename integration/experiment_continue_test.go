package integration

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// TestExperimentContinuesAsNewWithRunningTrials starts slotsSpec's experiment (12
// trials of the example trainer, 4 at a time) with a history bound of 250 events, so
// that it continues as new several times while trials run. Every run of the chain stays
// under 10,000 events and 10 MB, later runs follow the carried trials' jobs
// (WaitScheduledJob) instead of starting them again, every trial's job runs once, and
// the status query answers across the chain.
func TestExperimentContinuesAsNewWithRunningTrials(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, name := workspace(t), "carry"
	const trials, bound = 12, 250
	exp, err := schemas.DecodeExperiment([]byte(slotsSpec(ws, name, trials, 4)))
	if err != nil {
		t.Fatal(err)
	}
	exp.Default()
	if errs := exp.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	// Started as the API starts it, with a small history bound (an option the API does
	// not expose).
	spec := workflows.ExperimentStart(workflows.ExperimentInput{Experiment: *exp,
		Options: workflows.ExperimentOptions{MaxHistoryEvents: bound}})
	first, err := env.temporal.ExecuteWorkflow(ctx, spec.ClientOptions(workflows.TaskQueue), spec.WorkflowType, spec.Input)
	if err != nil {
		t.Fatal(err)
	}
	c := itest.AdminClient(t, env.e)
	x := waitExperiment(t, ctx, c, ws, name)
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != trials || st.Failed != 0 {
		t.Fatalf("experiment %s (%s): %d trials, %d failed", st.Phase, st.Message, len(st.Trials), st.Failed)
	}

	// Walk the chain of runs from the first.
	runID, runs, followed := first.GetRunID(), 0, 0
	for runID != "" {
		runs++
		it := env.temporal.GetWorkflowHistory(ctx, spec.ID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events, size, next := 0, 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			size += proto.Size(ev)
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == workflows.ActivityWaitScheduledJob {
				followed++
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		t.Logf("run %d: %d events, %d bytes", runs, events, size)
		if events >= 10000 || size >= 10<<20 {
			t.Errorf("run %d: %d events, %d bytes: want under 10,000 events and 10 MB", runs, events, size)
		}
		runID = next
	}
	t.Logf("%d runs with a bound of %d events; %d carried trial jobs followed; %d completed, %d pruned", runs, bound, followed, st.Completed, st.Pruned)
	if runs < 2 || st.Runs != runs {
		t.Errorf("%d runs in the chain, the status says %d: want at least 2", runs, st.Runs)
	}
	if followed == 0 {
		t.Error("no run followed a carried trial's job: no trial was running at a continue-as-new")
	}
	jobs, err := c.ListJobs(ctx, ws, dlc.ListOptions{Labels: []string{"experiment=" + name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != trials {
		t.Errorf("%d trial jobs, want %d", len(jobs.Items), trials)
	}
	for _, tr := range st.Trials {
		if tr.Attempts != 1 || !tr.Phase.Final() {
			t.Errorf("trial %d: %s after %d attempts", tr.ID, tr.Phase, tr.Attempts)
		}
	}
}
