package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// slotsSpec is an experiment of the example trainer whose trials take about 1 to 10 s:
// 10 epochs, each followed by a sleep of 100 to 1000 ms (a searched parameter), and
// ASHA rungs at epochs 1, 3 and 9.
func slotsSpec(ws, name string, trials, parallelism int) string {
	return fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: lr, type: float, min: 0.01, max: 3, log: true}
    - {name: l2, type: float, min: 0.000001, max: 0.1, log: true}
    - {name: sleep, type: int, min: 100, max: 1000}
  objective: {metric: accuracy, direction: maximize, stepMetric: epoch}
  algorithm: {name: tpe, seed: 5, startupTrials: 4}
  earlyStopping: {rule: asha, minResource: 1, reductionFactor: 3, maxResource: 10}
  maxTrials: %d
  parallelism: %d
  maxFailedTrials: 0
  trialTemplate:
    framework: custom
    command: [%q]
    args: [--epochs, "10", --lr, "${params.lr}", --l2, "${params.l2}", --epoch-sleep, "${params.sleep}ms"]
    roles:
      worker: {replicas: 1}
    timeout: 5m
`, name, ws, trials, parallelism, env.trainer)
}

// TestExperimentSlotsOnTheRealStack runs 24 trials of the example trainer, 4 at a time,
// that take 1 to 10 s and are pruned at different rungs, and measures slot utilisation:
// the time trials held a slot (the experiment's trial start to finish) and the time
// their jobs ran (the job's start to finish), each over parallelism × the experiment's
// start to finish. It checks that a freed slot was refilled before an older trial
// finished (trial N started while trial N-parallelism still ran), which the ordered
// schedule never did, and that the experiment's history replays without
// non-determinism, so a recovered run rebuilds the same trials.
func TestExperimentSlotsOnTheRealStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws, name := workspace(t), "slots"
	const trials, parallelism = 24, 4
	c := itest.AdminClient(t, env.e)
	if _, err := c.CreateExperiment(ctx, []byte(slotsSpec(ws, name, trials, parallelism))); err != nil {
		t.Fatal(err)
	}
	x := waitExperiment(t, ctx, c, ws, name)
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != trials || st.Failed != 0 {
		t.Fatalf("experiment %s (%s): %d trials, %d failed", st.Phase, st.Message, len(st.Trials), st.Failed)
	}

	makespan := st.FinishTime.Sub(*st.StartTime)
	var held, ran time.Duration
	prunedAt := map[int64]int{}
	refilled := 0
	for _, tr := range st.Trials {
		held += tr.FinishTime.Sub(*tr.StartTime)
		j, err := c.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Fatalf("trial %d: job %s: %v", tr.ID, tr.Job, err)
		}
		if j.Status.StartTime == nil || j.Status.FinishTime == nil {
			t.Fatalf("trial %d: job %s has no start or finish time: %+v", tr.ID, tr.Job, j.Status)
		}
		ran += j.Status.FinishTime.Sub(*j.Status.StartTime)
		if tr.Phase == schemas.TrialPruned {
			prunedAt[tr.Step]++
		}
		if tr.ID >= parallelism && tr.StartTime.Before(*st.Trials[tr.ID-parallelism].FinishTime) {
			refilled++
		}
	}
	use := func(d time.Duration) float64 { return 100 * d.Seconds() / (parallelism * makespan.Seconds()) }
	t.Logf("%d trials, %d at a time: %d completed, %d pruned (at step: %v); makespan %s; slot-held utilisation %.1f%%; job-run utilisation %.1f%%; %d trials started before trial N-%d finished",
		trials, parallelism, st.Completed, st.Pruned, prunedAt, makespan.Round(time.Millisecond), use(held), use(ran), refilled, parallelism)
	if len(prunedAt) < 2 || st.Completed == 0 {
		t.Errorf("pruned at steps %v, %d completed: want trials pruned at two rungs and some completed", prunedAt, st.Completed)
	}
	if refilled == 0 {
		t.Error("no trial started before trial N-parallelism finished: freed slots waited")
	}

	// The history, with its recorded suggestions and decisions, replays cleanly.
	id := workflows.ExperimentWorkflowID(ws, name)
	it := env.temporal.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	workers.RegisterWorkflows(r)
	if err := r.ReplayWorkflowHistory(nil, &h); err != nil {
		t.Errorf("replaying the experiment's %d events: %v", len(h.Events), err)
	}
	recordHistory(t, ctx, id, "experiment_slots.json")
}
