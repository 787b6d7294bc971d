package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// The algorithms that the other experiment tests run through the SDK only, grid and
// random, run the example trainer through `dlc experiment create --wait` (the CLI
// binary) too: the experiment succeeds and its trials have exactly the algorithm's
// parameters (the grid's first points in order, random search's draws for the seed).
// With TestExperimentTunesTheExampleTrainer (tpe), TestExperimentNewAlgorithms (cmaes,
// gp, hyperband, bohb), TestExperimentMultiObjectiveParetoFront (nsga2),
// TestExperimentPBTSurvivesWorkerKill and TestPyTorchPBTExample (pbt), every algorithm
// runs through the CLI.
func TestExperimentGridAndRandomThroughTheCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	run := dlcRunner(t, ctx, ws)
	const trials = 4
	for _, tc := range []struct{ algo, algorithm, space string }{
		{"grid", "  algorithm: {name: grid}\n", `    - {name: lr, type: float, min: 0.5, max: 1.5, step: 1}
    - {name: l2, type: float, min: 0.0001, max: 0.0002, step: 0.0001}
`},
		{"random", "  algorithm: {name: random, seed: 5}\n", ""},
	} {
		name := "cli-" + tc.algo
		repl := []string{
			tuneAlgorithm, tc.algorithm,
			tuneEarlyStopping, "",
			"maxTrials: 16", fmt.Sprintf("maxTrials: %d", trials),
			"parallelism: 4", "parallelism: 2",
			`args: [--epochs, "10",`, `args: [--epochs, "2",`,
		}
		if tc.space != "" {
			repl = append(repl, `    - {name: lr, type: float, min: 0.01, max: 3, log: true}
    - {name: l2, type: float, min: 0.000001, max: 0.1, log: true}
`, tc.space)
		}
		path := filepath.Join(t.TempDir(), name+".yaml")
		writeFile(t, path, tuneSpec(t, ws, name, nil, repl...))
		out, err := run("experiment", "create", "-f", path, "--wait")
		if err != nil {
			e, gerr := c.GetExperiment(context.Background(), ws, name)
			t.Fatalf("%s: dlc experiment create --wait: %v\n%s\nthe experiment: %+v (%v)", tc.algo, err, out, e, gerr)
		}
		if want := "Algorithm:   " + tc.algo; !strings.Contains(out, "Phase:       Succeeded") || !strings.Contains(out, want) {
			t.Errorf("%s: output lacks Succeeded or %q:\n%s", tc.algo, want, out)
		}
		e, err := c.GetExperiment(ctx, ws, name)
		if err != nil {
			t.Fatal(err)
		}
		st := e.Status
		if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != trials || st.Completed != trials {
			t.Fatalf("%s: experiment %s (%s): %d trials, %d completed, %d failed", tc.algo, st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
		}
		space := workflows.SearchSpaceOf(e.Spec.Spec.SearchSpace)
		var s hpo.Sampler
		if tc.algo == "grid" {
			s, _ = hpo.NewGrid()
		} else {
			s, _ = hpo.NewRandom()
		}
		for _, tr := range st.Trials {
			p, err := s.Suggest(hpo.History{Space: space, Seed: st.Seed}, tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := workflows.ParamValuesOf(e.Spec.Spec.SearchSpace, p); fmt.Sprint(tr.Params) != fmt.Sprint(want) {
				t.Errorf("%s: trial %d params %v, want %v", tc.algo, tr.ID, tr.Params, want)
			}
		}
		t.Logf("%s: %d trials through the CLI, best trial %d accuracy %.3f %v", tc.algo, len(st.Trials), *st.BestTrial, *st.BestValue, st.BestParams)
	}
}

// Every example under examples/ that holds an Experiment (or a Schedule of experiments)
// is valid for `dlc validate -f`, the CLI binary against the running stack. (They run:
// experiment/tune.yaml in TestExperimentTunesTheExampleTrainer, experiment/pbt.yaml in
// TestExperimentPBTSurvivesWorkerKill, pytorch/experiment.yaml in
// TestPyTorchExperimentASHAPrunes, pytorch/pbt.yaml in TestPyTorchPBTExample.)
func TestExampleExperimentsValidateWithTheCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := dlcRunner(t, ctx, "default")
	root, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(data), "kind: Experiment") || strings.Contains(string(data), "experimentTemplate:")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d experiment examples, want at least 4: %v", len(files), files)
	}
	for _, f := range files {
		out, err := run("validate", "-f", f)
		if err != nil || strings.TrimSpace(out) != f+": valid" {
			t.Errorf("dlc validate -f %s: %v\n%s", f, err, out)
		}
	}
	t.Logf("%d experiment examples valid: %v", len(files), files)
}
