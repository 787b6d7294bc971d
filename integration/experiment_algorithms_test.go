package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// The tune.yaml lines the algorithm tests replace.
const (
	tuneAlgorithm = `  algorithm:
    name: tpe
    seed: 4                    # the same seed gives the same trials
    startupTrials: 4           # random until 4 trials have finished, then TPE
`
	tuneEarlyStopping = `  earlyStopping:
    rule: asha                 # rungs at epochs 1, 3 and 9: the best third goes on
    minResource: 1
    reductionFactor: 3
    maxResource: 10
`
	tuneObjective = `  objective:
    metric: accuracy
    direction: maximize
    stepMetric: epoch          # the trainer reports ` + "`dlc:metric epoch=E step=S loss=L accuracy=A`" + `
`
)

// dlcRunner runs the dlc binary against the test stack in workspace ws.
func dlcRunner(t *testing.T, ctx context.Context, ws string) func(args ...string) (string, error) {
	t.Helper()
	bin := dlcBinary(t)
	return itest.CLI{Bin: bin, Server: env.e.APIURL, Token: env.e.AdminToken, Workspace: ws, Dir: t.TempDir()}.Runner(ctx)
}

// randomParams is what random search would suggest for trial id of e.
func randomParams(t *testing.T, e *api.ExperimentDetail, id int) map[string]any {
	t.Helper()
	rs, _ := hpo.NewRandom()
	space := workflows.SearchSpaceOf(e.Spec.Spec.SearchSpace)
	p, err := rs.Suggest(hpo.History{Space: space, Seed: e.Status.Seed}, id)
	if err != nil {
		t.Fatal(err)
	}
	return workflows.ParamValuesOf(e.Spec.Spec.SearchSpace, p)
}

// Each new algorithm runs a short experiment of the example trainer end to end through
// `dlc experiment create --wait` on the real stack: it succeeds, every trial ran, the
// best beats chance, and the trials' parameters are the algorithm's: hyperband's are
// exactly random search's (it is random search in brackets, with rule hyperband), while
// cmaes, gp and bohb suggest other values than random search would for the same seed.
func TestExperimentNewAlgorithms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	run := dlcRunner(t, ctx, ws)
	const trials = 6
	for _, tc := range []struct {
		algo, extra, stopping string
	}{
		{"cmaes", "    populationSize: 3\n", ""},
		{"gp", "    startupTrials: 3\n", ""},
		{"hyperband", "", "  earlyStopping: {maxResource: 4}\n"},
		{"bohb", "    startupTrials: 2\n", "  earlyStopping: {rule: hyperband, maxResource: 4}\n"},
	} {
		name := "algo-" + tc.algo
		spec := tuneSpec(t, ws, name, nil,
			tuneAlgorithm, fmt.Sprintf("  algorithm:\n    name: %s\n    seed: 7\n%s", tc.algo, tc.extra),
			tuneEarlyStopping, tc.stopping,
			"maxTrials: 16", fmt.Sprintf("maxTrials: %d", trials),
			"parallelism: 4", "parallelism: 2",
			`args: [--epochs, "10",`, `args: [--epochs, "4",`,
		)
		path := filepath.Join(t.TempDir(), name+".yaml")
		writeFile(t, path, spec)
		out, err := run("experiment", "create", "-f", path, "--wait")
		if err != nil {
			t.Fatalf("%s: dlc experiment create --wait: %v\n%s", tc.algo, err, out)
		}
		wantRule := "none"
		if tc.stopping != "" {
			wantRule = "hyperband"
		}
		for _, want := range []string{"Phase:       Succeeded", "Algorithm:   " + tc.algo + ", seed 7; early stopping: " + wantRule} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", tc.algo, want, out)
			}
		}
		e, err := c.GetExperiment(ctx, ws, name)
		if err != nil {
			t.Fatal(err)
		}
		st := e.Status
		if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != trials || st.Completed+st.Pruned != trials || st.BestValue == nil {
			t.Fatalf("%s: experiment %s (%s): %d trials, %d completed, %d pruned, %d failed", tc.algo, st.Phase, st.Message,
				len(st.Trials), st.Completed, st.Pruned, st.Failed)
		}
		if *st.BestValue < 0.6 {
			t.Errorf("%s: best accuracy %.3f, want >= 0.6", tc.algo, *st.BestValue)
		}
		same := 0
		for _, tr := range st.Trials {
			if fmt.Sprint(tr.Params) == fmt.Sprint(randomParams(t, e, tr.ID)) {
				same++
			}
		}
		t.Logf("%s: %d trials (%d completed, %d pruned), best trial %d accuracy %.3f %v; %d of %d trials equal random search's",
			tc.algo, len(st.Trials), st.Completed, st.Pruned, *st.BestTrial, *st.BestValue, st.BestParams, same, trials)
		switch tc.algo {
		case "hyperband":
			if same != trials {
				t.Errorf("hyperband: %d of %d trials have random search's parameters, want all", same, trials)
			}
		default:
			if same == trials {
				t.Errorf("%s: every trial has random search's parameters", tc.algo)
			}
		}
		for _, tr := range st.Trials {
			if tr.Phase == schemas.TrialPruned && !strings.Contains(tr.Message, "by rule hyperband") {
				t.Errorf("%s: pruned trial %d: %q", tc.algo, tr.ID, tr.Message)
			}
		}
	}
}

// A multi-objective experiment (maximise accuracy, minimise loss) with nsga2 runs the
// example trainer end to end: every completed trial has both values, the status's
// Pareto front holds exactly the completed trials that no other beats on both, the
// front trial's values are what its job logged, and `dlc experiment get` shows the front.
func TestExperimentMultiObjectiveParetoFront(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	run := dlcRunner(t, ctx, ws)
	name := "pareto"
	const trials = 8
	spec := tuneSpec(t, ws, name, nil,
		tuneObjective, "  objectives:\n    - {metric: accuracy, direction: maximize, stepMetric: epoch}\n    - {metric: loss, direction: minimize}\n",
		tuneAlgorithm, "  algorithm: {name: nsga2, seed: 3, populationSize: 4}\n",
		tuneEarlyStopping, "",
		"maxTrials: 16", fmt.Sprintf("maxTrials: %d", trials),
		"parallelism: 4", "parallelism: 2",
		`args: [--epochs, "10",`, `args: [--epochs, "3",`,
	)
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeFile(t, path, spec)
	out, err := run("experiment", "create", "-f", path, "--wait")
	if err != nil {
		t.Fatalf("dlc experiment create --wait: %v\n%s", err, out)
	}
	e, err := c.GetExperiment(ctx, ws, name)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || st.Completed != trials || len(st.ParetoFront) == 0 || st.BestTrial != nil {
		t.Fatalf("experiment %s (%s): %d completed, front %v, best %v", st.Phase, st.Message, st.Completed, st.ParetoFront, st.BestTrial)
	}
	dominates := func(a, b schemas.TrialStatus) bool {
		acc, loss := a.Values["accuracy"] >= b.Values["accuracy"], a.Values["loss"] <= b.Values["loss"]
		strict := a.Values["accuracy"] > b.Values["accuracy"] || a.Values["loss"] < b.Values["loss"]
		return acc && loss && strict
	}
	var front []int
	for _, a := range st.Trials {
		if len(a.Values) != 2 || a.Value == nil || a.Values["accuracy"] != *a.Value {
			t.Errorf("trial %d: values %v, value %v: want accuracy and loss, accuracy = value", a.ID, a.Values, a.Value)
		}
		dominated := false
		for _, b := range st.Trials {
			if b.ID != a.ID && dominates(b, a) {
				dominated = true
			}
		}
		if !dominated {
			front = append(front, a.ID)
		}
	}
	if !slices.Equal(front, st.ParetoFront) {
		t.Errorf("status Pareto front %v, recomputed from the trials' values %v", st.ParetoFront, front)
	}
	// The first front trial's values are what its job logged last.
	ft := st.Trials[st.ParetoFront[0]]
	if got := lastAccuracy(t, ctx, c, ws, ft.Job); got != ft.Values["accuracy"] {
		t.Errorf("trial %d logged accuracy %v, status says %v", ft.ID, got, ft.Values["accuracy"])
	}
	t.Logf("%d trials; Pareto front %v; %s", len(st.Trials), st.ParetoFront, st.Message)
	got, err := run("experiment", "get", name)
	if err != nil {
		t.Fatalf("dlc experiment get: %v\n%s", err, got)
	}
	for _, want := range []string{"Objectives:  maximize accuracy, minimize loss", fmt.Sprintf("Pareto front: %d trial(s)", len(st.ParetoFront)), "ACCURACY", "LOSS"} {
		if !strings.Contains(got, want) {
			t.Errorf("dlc experiment get lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(st.Message, "Pareto front of accuracy, loss: trials ") {
		t.Errorf("message %q does not name the front", st.Message)
	}
}
