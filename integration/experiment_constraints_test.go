package integration

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// An experiment with a constraint runs on the real stack: each trial is a process that
// reports loss = (x − 0.9)² and mem = 20·x; mem ≤ 10 (x ≤ 0.5) is the constraint, so
// the trials with the lowest loss are infeasible. The status shows every completed
// trial's mem and whether it was feasible, the best trial is the best feasible one
// (while an infeasible trial had a lower loss: the constraint really excluded it), and
// `dlc experiment get` shows the constraint and the column.
func TestExperimentConstraintExcludesInfeasibleTrials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	run := dlcRunner(t, ctx, ws)
	const name, trials = "budget", 10
	doc := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace: [{name: x, type: float, min: 0, max: 1}]
  objective: {metric: loss, direction: minimize}
  constraints: [{metric: mem, max: 10}]
  algorithm: {name: tpe, seed: 11, startupTrials: 4}
  maxTrials: %d
  parallelism: 2
  trialTemplate:
    framework: custom
    command: [sh, -c, 'awk -v x=${params.x} "BEGIN { printf \"dlc:metric loss=%%.6f mem=%%.6f\\n\", (x-0.9)*(x-0.9), 20*x }"']
    roles: {worker: {replicas: 1}}
`, name, ws, trials)
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeFile(t, path, doc)
	if out, err := run("experiment", "create", "-f", path, "--wait"); err != nil {
		t.Fatalf("dlc experiment create --wait: %v\n%s", err, out)
	}
	e, err := c.GetExperiment(ctx, ws, name)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || st.Completed != trials {
		t.Fatalf("experiment %s (%s): %d of %d completed", st.Phase, st.Message, st.Completed, trials)
	}
	bestFeasible, bestFeasibleID, bestInfeasible := math.Inf(1), -1, math.Inf(1)
	infeasible := 0
	for _, tr := range st.Trials {
		x := tr.Params["x"].(float64)
		mem, ok := tr.Constraints["mem"]
		if !ok || math.Abs(mem-20*x) > 1e-4 || tr.Feasible == nil || tr.Value == nil {
			t.Fatalf("trial %d (x=%v): constraints %v, feasible %v, value %v: want mem = 20x and a feasibility", tr.ID, x, tr.Constraints, tr.Feasible, tr.Value)
		}
		if *tr.Feasible != (mem <= 10) {
			t.Errorf("trial %d: mem %v, feasible %v", tr.ID, mem, *tr.Feasible)
		}
		if *tr.Feasible && *tr.Value < bestFeasible {
			bestFeasible, bestFeasibleID = *tr.Value, tr.ID
		}
		if !*tr.Feasible {
			infeasible++
			bestInfeasible = math.Min(bestInfeasible, *tr.Value)
		}
	}
	t.Logf("%d trials, %d infeasible; best feasible loss %.4f (trial %d), best infeasible loss %.4f", len(st.Trials), infeasible, bestFeasible, bestFeasibleID, bestInfeasible)
	if infeasible == 0 || !(bestInfeasible < bestFeasible) {
		t.Fatalf("no infeasible trial beat the feasible ones (%d infeasible): the constraint excluded nothing", infeasible)
	}
	if st.BestTrial == nil || *st.BestTrial != bestFeasibleID || st.BestValue == nil || *st.BestValue != bestFeasible {
		t.Fatalf("best trial %v (%v), want the best feasible: trial %d (%v)", st.BestTrial, st.BestValue, bestFeasibleID, bestFeasible)
	}
	out, err := run("experiment", "get", name)
	if err != nil {
		t.Fatalf("dlc experiment get: %v\n%s", err, out)
	}
	for _, want := range []string{"Constraints: mem <= 10", "MEM", "FEASIBLE", fmt.Sprintf("Best:        trial %d", bestFeasibleID)} {
		if !strings.Contains(out, want) {
			t.Errorf("dlc experiment get lacks %q:\n%s", want, out)
		}
	}
}
