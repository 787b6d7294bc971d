package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// Trials enqueued while an experiment runs are its next trials, with exactly the
// enqueued values, and survive a worker killed before they start: the queue is in the
// workflow's state. Bad parameter sets are refused with their field path and enqueue
// nothing.
func TestExperimentEnqueuedTrialsRunNextThroughAWorkerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, stateDir, first := workerStack(t, ctx)
	c := itest.AdminClient(t, e)
	const ws, name = "enqueue", "queued"
	gate := filepath.Join(t.TempDir(), "gate")
	// Every trial reports loss = x once the gate exists: trial 0 holds until the test
	// has enqueued and restarted the worker.
	doc := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: x, type: float, min: 0, max: 1}
    - {name: opt, type: categorical, values: [sgd, adam]}
  objective: {metric: loss, direction: minimize}
  algorithm: {name: tpe, seed: 5}
  maxTrials: 4
  parallelism: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, 'while [ ! -e %s ]; do sleep 0.1; done; echo "dlc:metric loss=${params.x}"']
    roles: {worker: {replicas: 1}}
`, name, ws, gate)
	if _, err := c.CreateExperiment(ctx, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "trial 0 runs", func() bool {
		ex, err := c.GetExperiment(ctx, ws, name)
		return err == nil && len(ex.Status.Trials) == 1 && ex.Status.Trials[0].Phase == schemas.TrialRunning
	}, 100*time.Millisecond)

	// Refused, naming the field, and nothing enqueued.
	for _, bad := range []struct {
		set  map[string]any
		want string
	}{
		{map[string]any{"x": 0.5, "opt": "sgd", "nope": 1}, "trials[0].nope"},
		{map[string]any{"x": 2, "opt": "sgd"}, "trials[0].x"},
		{map[string]any{"x": 0.5, "opt": "rmsprop"}, "trials[0].opt"},
		{map[string]any{"x": 0.5}, "trials[0].opt"},
	} {
		_, err := c.EnqueueTrials(ctx, ws, name, bad.set)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("enqueue %v: error %v, want one naming %s", bad.set, err, bad.want)
		}
	}
	if _, err := c.EnqueueTrials(ctx, ws, name, map[string]any{"x": 0.1, "opt": "adam"}, map[string]any{"x": 0.2, "opt": "sgd"},
		map[string]any{"x": 0.3, "opt": "sgd"}, map[string]any{"x": 0.4, "opt": "sgd"}); err == nil || !strings.Contains(err.Error(), "room for 3") {
		t.Fatalf("enqueue of 4 with room for 3: error %v, want a refusal", err)
	}
	ex, err := c.GetExperiment(ctx, ws, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Status.Queued) != 0 {
		t.Fatalf("refused requests enqueued %v", ex.Status.Queued)
	}

	want := []map[string]any{{"x": 0.125, "opt": "adam"}, {"x": "0.75", "opt": "sgd"}}
	if _, err := c.EnqueueTrials(ctx, ws, name, want...); err != nil {
		t.Fatal(err)
	}
	if ex, err = c.GetExperiment(ctx, ws, name); err != nil || len(ex.Status.Queued) != 2 {
		t.Fatalf("queued after enqueue: %v (%v), want 2", ex.Status.Queued, err)
	}
	// The worker dies with trial 0 running and the queue not yet used.
	first.kill()
	if first.cmd.ProcessState == nil || first.cmd.ProcessState.Success() {
		t.Fatalf("the first worker was not killed: %v", first.cmd.ProcessState)
	}
	startWorker(t, e, stateDir)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done, err := c.WaitExperiment(ctx, ws, name, 200*time.Millisecond, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := done.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 4 || len(st.Queued) != 0 {
		t.Fatalf("experiment %s (%s): %d trials, %d still queued", st.Phase, st.Message, len(st.Trials), len(st.Queued))
	}
	for i, tr := range st.Trials {
		t.Logf("trial %d: enqueued %v, params %v, value %v", tr.ID, tr.Enqueued, tr.Params, valueOf(tr.Value))
		if tr.Phase != schemas.TrialCompleted {
			t.Errorf("trial %d %s: %s", tr.ID, tr.Phase, tr.Message)
		}
		enqueued := i == 1 || i == 2
		if tr.Enqueued != enqueued {
			t.Errorf("trial %d: enqueued %v, want %v", tr.ID, tr.Enqueued, enqueued)
		}
	}
	for k, w := range []struct {
		x   float64
		opt string
	}{{0.125, "adam"}, {0.75, "sgd"}} {
		tr := st.Trials[k+1]
		if tr.Params["x"] != w.x || tr.Params["opt"] != w.opt || tr.Value == nil || *tr.Value != w.x {
			t.Errorf("trial %d: params %v, value %v; want x=%v opt=%s and loss = x", tr.ID, tr.Params, valueOf(tr.Value), w.x, w.opt)
		}
	}
}

func valueOf(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
