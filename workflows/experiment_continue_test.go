package workflows_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// carryJobs gives the simulation the carried trials' jobs: they started in an earlier
// run and have all their reports by the time the next run reads them.
func (sim *slotSim) carryJobs(st *workflows.ExperimentState) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	batch := []float64{8, 32, 128}
	for _, tr := range st.Trials {
		if tr.Run == nil {
			continue
		}
		params := map[string]any{"lr": tr.Params["lr"], "l2": tr.Params["l2"], "bs": batch[int(tr.Params["bs"])]}
		j := &slotJob{}
		for e := 1; e <= slotEpochs; e++ {
			j.reports = append(j.reports, simAccuracy(params, e))
		}
		sim.jobs[tr.Job] = j
	}
}

// TestExperimentContinuesAsNewCarryingRunningTrials runs slotExperiment's 120 trials as
// a chain of runs, each told after 20 s that its history is large: each run continues as
// new with its trials running, carrying their handles, and the next run follows those
// jobs instead of starting them again; each trial's event count carries on. The status query answers in every run, the
// carried state stays far below Temporal's payload limit, and the search ends with every
// trial run once.
func TestExperimentContinuesAsNewCarryingRunningTrials(t *testing.T) {
	exp := slotExperiment()
	var state *workflows.ExperimentState
	started := map[string]int{}  // trial job -> how many runs started it
	trialSeqs := map[int][]int{} // trial id -> the seqs of its events, over every run
	carriedRunning := 0
	for run := 1; ; run++ {
		if run > 20 {
			t.Fatal("the experiment did not end within 20 runs")
		}
		sim := newSlotSim(t)
		if state != nil {
			sim.carryJobs(state)
		}
		sim.env.RegisterDelayedCallback(func() { sim.env.SetCurrentHistoryLength(9000) }, 20*time.Second)
		queried := false
		query := func() {
			v, err := sim.env.QueryWorkflow(workflows.QueryStatus)
			var view workflows.ExperimentView
			if err == nil {
				err = v.Get(&view)
			}
			if err != nil || view.Status.Runs != run || len(view.Status.Trials) == 0 {
				t.Errorf("run %d: status query: %+v, %v", run, view.Status, err)
			}
			queried = true
		}
		// One simulated second in, every run has its trials: carried ones, or the first
		// suggestions. (The last run can be over in a few simulated seconds: how far
		// each run gets depends on the order its trials finish in.)
		sim.env.RegisterDelayedCallback(query, time.Second)
		sim.env.ExecuteWorkflow(workflows.ExperimentWorkflowName, workflows.ExperimentInput{Experiment: exp, State: state,
			Options: workflows.ExperimentOptions{MaxHistoryEvents: 8000}})
		if !sim.env.IsWorkflowCompleted() {
			t.Fatalf("run %d did not complete", run)
		}
		for id, seqs := range sim.trialSeqs {
			trialSeqs[id] = append(trialSeqs[id], seqs...)
		}
		for name := range sim.jobs {
			if sim.jobs[name].start != (time.Time{}) {
				started[name]++
			}
		}
		if state != nil {
			carried := 0
			for _, tr := range state.Trials {
				if tr.Run != nil {
					carried++
				}
			}
			if len(sim.followed) != carried {
				t.Errorf("run %d followed %d carried jobs, %d were carried", run, len(sim.followed), carried)
			}
		}
		if !queried {
			t.Errorf("run %d ended before its status was queried", run)
		}
		var can *workflow.ContinueAsNewError
		err := sim.env.GetWorkflowError()
		if err == nil {
			var res workflows.ExperimentResult
			if err := sim.env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			st := res.Status
			if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != int(exp.Spec.MaxTrials) || st.Runs != run {
				t.Fatalf("last run %d: %s, %d trials, %d runs: %s", run, st.Phase, len(st.Trials), st.Runs, st.Message)
			}
			for _, tr := range st.Trials {
				if tr.Attempts != 1 || started[tr.Job] != 1 || !tr.Phase.Final() {
					t.Errorf("trial %d: %s, %d attempts, its job %s started by %d runs", tr.ID, tr.Phase, tr.Attempts, tr.Job, started[tr.Job])
				}
				// Its own event count carries on across the runs: Running is 1, its end 2.
				if seqs := trialSeqs[tr.ID]; len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
					t.Errorf("trial %d: event seqs %v over the runs, want [1 2]", tr.ID, seqs)
				}
			}
			t.Logf("%d runs; %d trials carried running across continue-as-new; %d completed, %d pruned",
				run, carriedRunning, st.Completed, st.Pruned)
			if run < 3 || carriedRunning == 0 {
				t.Errorf("%d runs, %d trials carried running: the chain did not carry trials", run, carriedRunning)
			}
			return
		}
		if !errors.As(err, &can) {
			t.Fatalf("run %d ended with %v, want continue-as-new", run, err)
		}
		var next workflows.ExperimentInput
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, p := range can.Input.GetPayloads() {
			size += len(p.GetData())
		}
		running := 0
		for _, tr := range next.State.Trials {
			switch {
			case tr.Phase == schemas.TrialRunning && (tr.Run == nil || tr.Run.UID == ""):
				t.Errorf("run %d: trial %d carried Running without its job's run id: %+v", run, tr.ID, tr.Run)
			case tr.Phase == schemas.TrialRunning:
				running++
			case tr.Run != nil:
				t.Errorf("run %d: trial %d carried %s with a run: %+v", run, tr.ID, tr.Phase, tr.Run)
			}
		}
		carriedRunning += running
		data, _ := json.Marshal(next.State)
		t.Logf("run %d: continued as new with %d trials, %d running; input %d bytes", run, len(next.State.Trials), running, size)
		if size > 2<<20 || len(data) > 2<<20 {
			t.Errorf("run %d: carried input is %d bytes", run, size)
		}
		state = next.State
	}
}
