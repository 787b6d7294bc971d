package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// warmDoc is an experiment of real processes reporting loss = (x − 0.3)², x in
// [0, maxX], with warm (a YAML flow sequence of names) as spec.warmStart.experiments
// when not empty.
func warmDoc(name, ws string, maxX float64, algorithm string, trials int, warm string) string {
	doc := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: x, type: float, min: 0, max: %g}
    - {name: opt, type: categorical, values: [sgd, adam]}
  objective: {metric: loss, direction: minimize}
  algorithm: %s
  maxTrials: %d
  parallelism: 2
  trialTemplate:
    framework: custom
    command: [sh, -c, 'awk -v x=${params.x} "BEGIN { printf \"dlc:metric loss=%%.6f\\n\", (x-0.3)*(x-0.3) }"']
    roles: {worker: {replicas: 1}}
`, name, ws, maxX, algorithm, trials)
	if warm != "" {
		doc += "  warmStart: {experiments: " + warm + "}\n"
	}
	return doc
}

// A warm start on the real stack: a finished experiment's completed trials seed a new
// one whose search space is narrower. The new experiment reports how many it took (those
// inside its space) and that a source does not exist; its first trial, with TPE past its
// start-up count thanks to them, is not the random start-up suggestion the same
// experiment without the warm start makes; its own trials are numbered from 0 and its
// best is one of them.
func TestExperimentWarmStartSeedsTheSampler(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	run := func(doc string) *api.ExperimentDetail {
		t.Helper()
		created, err := c.CreateExperiment(ctx, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		e, err := c.WaitExperiment(ctx, ws, created.Spec.Metadata.Name, 200*time.Millisecond, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status.Phase != schemas.ExperimentSucceeded {
			t.Fatalf("experiment %s %s: %s", created.Spec.Metadata.Name, e.Status.Phase, e.Status.Message)
		}
		return e
	}
	src := run(warmDoc("source", ws, 1, "{name: random, seed: 3}", 8, ""))
	inside := 0
	for _, tr := range src.Status.Trials {
		if tr.Phase == schemas.TrialCompleted && tr.Params["x"].(float64) <= 0.5 {
			inside++
		}
	}
	if inside < 3 || inside == len(src.Status.Trials) {
		t.Fatalf("source: %d of %d trials inside x <= 0.5; the test wants some inside (>= 3) and some outside", inside, len(src.Status.Trials))
	}

	const tpe = "{name: tpe, seed: 9, startupTrials: 3}"
	// Refused at validation: itself, and twice the same.
	for _, bad := range []struct{ warm, want string }{
		{"[warm]", "spec.warmStart.experiments[0]: an experiment cannot warm-start from itself"},
		{"[source, source]", "spec.warmStart.experiments[1]: duplicate experiment"},
	} {
		if _, err := c.CreateExperiment(ctx, []byte(warmDoc("warm", ws, 0.5, tpe, 2, bad.warm))); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("warmStart %s: error %v, want %q", bad.warm, err, bad.want)
		}
	}
	warm := run(warmDoc("warm", ws, 0.5, tpe, 2, "[source, nowhere]"))
	cold := run(warmDoc("cold", ws, 0.5, tpe, 2, ""))
	wst := warm.Status.WarmStart
	if wst == nil || wst.Trials != inside || len(wst.Notes) != 2 ||
		!strings.Contains(wst.Notes[0], fmt.Sprintf("source: %d completed trial(s) used, %d outside this search space", inside, len(src.Status.Trials)-inside)) ||
		!strings.Contains(wst.Notes[1], "nowhere: not used: experiment nowhere not found") {
		t.Fatalf("warm start status %+v, want %d trials from source and nowhere not found", wst, inside)
	}
	if cold.Status.WarmStart != nil {
		t.Fatalf("an experiment without warmStart reports %+v", cold.Status.WarmStart)
	}
	w0, c0 := warm.Status.Trials[0].Params["x"], cold.Status.Trials[0].Params["x"]
	t.Logf("warm start: %v; first trial x = %v with it, %v without", wst.Notes, w0, c0)
	if w0 == c0 {
		t.Fatalf("the first trial is the same with the warm start and without (x = %v): the sampler did not see the earlier trials", w0)
	}
	if len(warm.Status.Trials) != 2 || warm.Status.Trials[0].ID != 0 || warm.Status.BestTrial == nil || *warm.Status.BestTrial > 1 {
		t.Fatalf("warm experiment trials %d, first id %d, best %v: want its own 2 trials, numbered from 0, the best among them",
			len(warm.Status.Trials), warm.Status.Trials[0].ID, warm.Status.BestTrial)
	}
}
