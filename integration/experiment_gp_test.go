package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A GP experiment of the example trainer runs one trial at a time past the point where
// the GP stops refitting its hyper-parameters on every suggestion (32 completed trials,
// hpo.gpFitSize) while its worker is SIGKILLed there, so that a new worker, whose
// sampler remembers no fit, carries on. It succeeds, and every trial's parameters are
// exactly what a fresh GP sampler suggests from the seed and the trials before it (their
// parameters and accuracies as the status shows them): the suggestions are a pure
// function of the history, whether the sampler's memo of fits was warm (the first
// worker) or cold (the second).
func TestExperimentGPSuggestionsSurviveAWorkerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	e, stateDir, worker := workerStack(t, ctx)
	ws, name := "gp-kill", "gp-kill"
	const trials, killAt = 38, 34
	spec := tuneSpec(t, ws, name, nil,
		tuneAlgorithm, "  algorithm:\n    name: gp\n    seed: 7\n    startupTrials: 3\n",
		tuneEarlyStopping, "",
		"maxTrials: 16", fmt.Sprintf("maxTrials: %d", trials),
		"parallelism: 4", "parallelism: 1",
		`args: [--epochs, "10",`, `args: [--epochs, "1",`,
	)
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeFile(t, path, spec)
	c := itest.AdminClient(t, e)
	dlcCmd := itest.CLI{Bin: dlcBinary(t), Server: e.APIURL, Token: e.AdminToken, Workspace: ws}.Runner(ctx)
	if out, err := dlcCmd("experiment", "create", "-f", path); err != nil {
		t.Fatalf("dlc experiment create: %v\n%s", err, out)
	}

	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("trial %d to start", killAt-1), func() error {
		x, err := c.GetExperiment(ctx, ws, name)
		if err != nil {
			return err
		}
		if len(x.Status.Trials) < killAt {
			return fmt.Errorf("%d trials", len(x.Status.Trials))
		}
		return nil
	}, itest.PollInterval)
	worker.kill()
	if worker.cmd.ProcessState == nil || worker.cmd.ProcessState.Success() {
		t.Fatalf("the worker was not killed: %v", worker.cmd.ProcessState)
	}
	startWorker(t, e, stateDir)

	x := waitExperiment(t, ctx, c, ws, name)
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != trials || st.Completed != trials {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
	}
	space := workflows.SearchSpaceOf(x.Spec.Spec.SearchSpace)
	h := hpo.History{Space: space, Direction: hpo.Maximize, Seed: st.Seed}
	trs := slices.Clone(st.Trials)
	slices.SortFunc(trs, func(a, b schemas.TrialStatus) int { return a.ID - b.ID })
	for i, tr := range trs {
		if tr.ID != i {
			t.Fatalf("trial ids %v are not 0..%d", tr.ID, trials-1)
		}
		gp, err := hpo.New(hpo.SamplerGP, hpo.TPEStartupTrials(3))
		if err != nil {
			t.Fatal(err)
		}
		want, err := gp.Suggest(h, i)
		if err != nil {
			t.Fatal(err)
		}
		if got, wantS := fmt.Sprint(tr.Params), fmt.Sprint(workflows.ParamValuesOf(x.Spec.Spec.SearchSpace, want)); got != wantS {
			t.Errorf("trial %d: params %s, a fresh GP sampler on the trials before it suggests %s", i, got, wantS)
		}
		h.Trials = append(h.Trials, hpo.Trial{ID: i, Params: internalParams(t, space, tr.Params), State: hpo.TrialCompleted, Value: tr.Value})
	}
	t.Logf("worker killed at %d trials; %d trials, best trial %d accuracy %.3f %v", killAt, len(trs), *st.BestTrial, *st.BestValue, st.BestParams)
}

// internalParams turns a trial's parameters as the status shows them back into package
// hpo's: numbers as they are, a categorical value as its index.
func internalParams(t *testing.T, space hpo.Space, shown map[string]any) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, q := range space {
		v, ok := shown[q.Name]
		if !ok {
			t.Fatalf("parameter %s missing from %v", q.Name, shown)
		}
		if q.Type == hpo.Categorical {
			k := slices.Index(q.Values, fmt.Sprint(v))
			if k < 0 {
				t.Fatalf("parameter %s = %v is none of %v", q.Name, v, q.Values)
			}
			out[q.Name] = float64(k)
			continue
		}
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("parameter %s = %v (%T), want a number", q.Name, v, v)
		}
		out[q.Name] = f
	}
	return out
}
