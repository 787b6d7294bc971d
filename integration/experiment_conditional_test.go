package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// A conditional search space on the real stack: momentum only with optimizer sgd, and
// width2 only when layers >= 2. Each trial is a process that prints its DLC_PARAMS and
// the substituted ${params.momentum}, then reports a loss of the active parameters. A
// trial gets exactly its active parameters: in the status, in DLC_PARAMS, and an empty
// ${params.momentum} with adam; and TPE ran both branches.
func TestExperimentConditionalSpace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	const name, trials = "branches", 8
	doc := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: optimizer, type: categorical, values: [sgd, adam]}
    - {name: lr, type: float, min: 0.001, max: 1, log: true}
    - {name: momentum, type: float, min: 0, max: 1, condition: {parameter: optimizer, in: [sgd]}}
    - {name: layers, type: int, min: 1, max: 3}
    - {name: width2, type: int, min: 8, max: 64, condition: {parameter: layers, min: 2}}
  objective: {metric: loss, direction: minimize}
  algorithm: {name: tpe, seed: 21, startupTrials: 4}
  maxTrials: %d
  parallelism: 2
  trialTemplate:
    framework: custom
    command: [sh, -c, 'echo "params=$DLC_PARAMS"; echo "momentum=[$1]"; echo "dlc:metric loss=$2"', trial, "${params.momentum}", "${params.lr}"]
    roles: {worker: {replicas: 1}}
`, name, ws, trials)
	if _, err := c.CreateExperiment(ctx, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	e, err := c.WaitExperiment(ctx, ws, name, 200*time.Millisecond, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || st.Completed != trials {
		t.Fatalf("experiment %s (%s): %d of %d completed", st.Phase, st.Message, st.Completed, trials)
	}
	seen := map[string]int{}
	for _, tr := range st.Trials {
		opt := tr.Params["optimizer"]
		seen[fmt.Sprint(opt)]++
		_, hasMomentum := tr.Params["momentum"]
		_, hasWidth := tr.Params["width2"]
		layers, _ := tr.Params["layers"].(float64)
		if hasMomentum != (opt == "sgd") || hasWidth != (layers >= 2) {
			t.Errorf("trial %d: status params %v: momentum only with sgd, width2 only with layers >= 2", tr.ID, tr.Params)
		}
		// What the process saw: its DLC_PARAMS and the substituted momentum.
		var dlcParams map[string]any
		momentum := "?"
		for _, r := range jobLogs(t, ctx, ws, tr.Job) {
			if s, ok := strings.CutPrefix(r.Line, "params="); ok {
				if err := json.Unmarshal([]byte(s), &dlcParams); err != nil {
					t.Fatalf("trial %d: DLC_PARAMS %q: %v", tr.ID, s, err)
				}
			}
			if s, ok := strings.CutPrefix(r.Line, "momentum="); ok {
				momentum = s
			}
		}
		if len(dlcParams) != len(tr.Params) {
			t.Errorf("trial %d: DLC_PARAMS %v, status params %v: want the same active parameters", tr.ID, dlcParams, tr.Params)
		}
		for k, v := range tr.Params {
			if fmt.Sprint(dlcParams[k]) != fmt.Sprint(v) {
				t.Errorf("trial %d: DLC_PARAMS[%s] = %v, status %v", tr.ID, k, dlcParams[k], v)
			}
		}
		want := "[]"
		if hasMomentum {
			want = fmt.Sprintf("[%v]", tr.Params["momentum"])
		}
		if momentum != want && !(hasMomentum && closeNumber(momentum, tr.Params["momentum"])) {
			t.Errorf("trial %d (%v): ${params.momentum} was %s, want %s", tr.ID, opt, momentum, want)
		}
	}
	t.Logf("%d trials: %v", len(st.Trials), seen)
	if seen["sgd"] == 0 || seen["adam"] == 0 {
		t.Fatalf("trials by optimizer %v: want both branches run", seen)
	}
}

// closeNumber reports whether "[x]" holds the number v.
func closeNumber(s string, v any) bool {
	var x float64
	if _, err := fmt.Sscanf(s, "[%g]", &x); err != nil {
		return false
	}
	f, ok := v.(float64)
	return ok && math.Abs(x-f) <= 1e-9*math.Max(1, math.Abs(f))
}
