package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/triggers"
)

// tuneTriggerDoc starts a two-trial random search for every event on
// dlc.<ws>.trigger.tune: each trial prints the dataset named by the event (a trigger
// param) and reports loss = its parameter x (a search-space parameter), checkpointing
// under loc.
func tuneTriggerDoc(ws, loc string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: tune, workspace: %[1]s, labels: {team: hpo}}
spec:
  subject: dlc.%[1]s.trigger.tune
  params: {dataset: "${event.data.key}"}
  action:
    experiment:
      searchSpace: [{name: x, type: float, min: 0.1, max: 0.9}]
      objective: {metric: loss, direction: minimize}
      algorithm: {name: random, seed: 7}
      maxTrials: 2
      parallelism: 2
      trialTemplate:
        framework: custom
        command: [sh, -c, 'echo "dataset=$DATASET"; echo "dlc:metric loss=$X"']
        env: [{name: DATASET, value: "${params.dataset}"}, {name: X, value: "${params.x}"}]
        roles: {worker: {replicas: 1}}
        checkpoint: {uri: "%[2]sckpt"}
`, ws, loc)
}

func dataEvent(id, key string) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/etl/tune","type":"com.example.data.ready","data":{"key":%q}}`, id, key)
}

// A trigger whose action is an experiment starts one experiment per event, through the
// experiment service: the event delivered twice, to two dispatchers (as a restarted or
// second dispatcher reads it), starts it once. The trigger's param reaches the trials,
// the search space's parameters stay theirs, the trials are served as a resource
// (API, SDK, CLI), and an experiment naming a location its workspace no longer has is
// not started.
func TestTriggerStartsExperimentOncePerEvent(t *testing.T) {
	t.Parallel()
	// The CLI is built first, outside the test's deadline (the build is shared).
	if _, err := buildDLC(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	ws := workspace(t)
	loc := "s3://dlc/teams/" + ws + "/"
	if _, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: ws, Storage: &api.WorkspaceStorage{Locations: []string{loc}}}); err != nil {
		t.Fatal(err)
	}
	// A trigger param with a search-space parameter's name is refused, naming it.
	bad := strings.Replace(tuneTriggerDoc(ws, loc), "params: {dataset:", "params: {x: \"${event.id}\", dataset:", 1)
	if _, err := env.api.ApplyTrigger(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "spec.params.x") {
		t.Fatalf("a trigger param shadowing the search space: %v, want an error naming spec.params.x", err)
	}
	if _, err := env.api.ApplyTrigger(ctx, []byte(tuneTriggerDoc(ws, loc))); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}

	// A second dispatcher, on a consumer of its own: every event reaches both, as it
	// reaches a dispatcher that restarted before acknowledging it.
	const second = "dlc-triggers-second"
	js := env.events.JetStream()
	svc := service.Compose(ctx, service.Config{Temporal: env.temporal, Storage: &storage.Policy{Workspaces: mustRegistry(t, ctx)}})
	d2, err := triggers.StartDispatcher(ctx, js, svc, triggers.WithConsumer(second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d2.Close(context.Background())
		_ = js.DeleteConsumer(context.Background(), triggers.InboundStream, second)
	})
	testutil.Eventually(t, 10*time.Second, "the second dispatcher loads the trigger", func() error {
		if d2.AppliedRevision() == 0 || len(triggersOf(t, ctx, ws)) != 1 {
			return fmt.Errorf("revision %d", d2.AppliedRevision())
		}
		return nil
	})

	subject := events.TriggerInboundSubject(ws, "tune")
	for range 2 { // the same event twice
		if _, err := js.Publish(ctx, subject, dataEvent("clicks-1", "clicks/2026-12-01.csv")); err != nil {
			t.Fatal(err)
		}
	}
	run := schemas.TriggerRunName("tune", "/etl/tune clicks-1")
	e := waitStartedExperiment(t, ctx, ws, run)
	inboundDrained(t, ctx)
	consumerDrained(t, ctx, second)

	if l, err := env.api.ListExperiments(ctx, ws, dlc.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("experiments of %s: %+v, %v; want exactly the one run", ws, l, err)
	}
	if e.Status.Phase != schemas.ExperimentSucceeded || len(e.Status.Trials) != 2 {
		t.Fatalf("experiment %s: %s (%s), %d trials", run, e.Status.Phase, e.Status.Message, len(e.Status.Trials))
	}
	if e.Spec.Metadata.Labels[schemas.LabelTrigger] != "tune" || e.Spec.Metadata.Labels["team"] != "hpo" {
		t.Errorf("labels %v: want the trigger's and %s=tune", e.Spec.Metadata.Labels, schemas.LabelTrigger)
	}
	fired, _ := streamEvents[events.TriggerFiredData](t, ctx, env.events, events.TriggerFiredSubject(ws, "tune"))
	if len(fired) != 1 {
		t.Errorf("%d fired events, want 1", len(fired))
	}
	for _, tr := range e.Status.Trials {
		x, _ := tr.Params["x"].(float64)
		if tr.Value == nil || math.Abs(*tr.Value-x) > 1e-9 {
			t.Errorf("trial %d: value %v, want its x %v", tr.ID, tr.Value, x)
		}
		if logs := logLines(t, ctx, ws, tr.Job); !strings.Contains(logs, "dataset=clicks/2026-12-01.csv") {
			t.Errorf("trial %d's job %s did not get the event's dataset:\n%s", tr.ID, tr.Job, logs)
		}
	}
	checkTrialsResource(t, ctx, ws, run, e)

	// The workspace's storage moves: the next event's experiment, which checkpoints in
	// the old location, is refused by the dispatcher and nothing starts.
	moveWorkspaceStorage(t, ctx, env.events, ws, "s3://dlc/teams/"+ws+"-moved/")
	if _, err := js.Publish(ctx, subject, dataEvent("clicks-2", "clicks/2026-12-02.csv")); err != nil {
		t.Fatal(err)
	}
	inboundDrained(t, ctx)
	consumerDrained(t, ctx, second)
	refused := schemas.TriggerRunName("tune", "/etl/tune clicks-2")
	if _, err := env.api.GetExperiment(ctx, ws, refused); !dlc.IsNotFound(err) {
		t.Errorf("experiment %s outside the workspace's storage: %v, want not found", refused, err)
	}
	if l, err := env.api.ListExperiments(ctx, ws, dlc.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("experiments after the refused event: %+v, %v", l, err)
	}
}

// checkTrialsResource reads the experiment's trials through the trials routes (SDK)
// and the CLI, and checks them against the experiment's status.
func checkTrialsResource(t *testing.T, ctx context.Context, ws, name string, e *api.ExperimentDetail) {
	t.Helper()
	l, err := env.api.ListTrials(ctx, ws, name, "")
	if err != nil {
		t.Fatalf("list trials: %v", err)
	}
	if l.UID != e.UID || len(l.Items) != len(e.Status.Trials) || l.BestTrial == nil || *l.BestTrial != *e.Status.BestTrial {
		t.Errorf("trials: %+v; want the experiment's %d trials, uid %s, best %v", l, len(e.Status.Trials), e.UID, e.Status.BestTrial)
	}
	if done, err := env.api.ListTrials(ctx, ws, name, "Completed"); err != nil || len(done.Items) != 2 {
		t.Errorf("completed trials: %+v, %v", done, err)
	}
	if running, err := env.api.ListTrials(ctx, ws, name, "Running"); err != nil || len(running.Items) != 0 {
		t.Errorf("running trials of an ended experiment: %+v, %v", running, err)
	}
	one, err := env.api.GetTrial(ctx, ws, name, 1)
	if err != nil || one.ID != 1 || one.Job != e.Status.Trials[1].Job {
		t.Errorf("trial 1: %+v, %v; want job %s", one, err, e.Status.Trials[1].Job)
	}
	if _, err := env.api.GetTrial(ctx, ws, name, 7); !dlc.IsNotFound(err) {
		t.Errorf("trial 7 of 2: %v, want not found", err)
	}
	if _, err := env.api.ListTrials(ctx, ws, "no-such", ""); !dlc.IsNotFound(err) {
		t.Errorf("trials of a missing experiment: %v, want not found", err)
	}

	run := dlcRunner(t, ctx, ws)
	out, err := run("experiment", "trials", name, "-o", "json")
	if err != nil {
		t.Fatalf("dlc experiment trials -o json: %v\n%s", err, out)
	}
	var got api.TrialList
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Items) != 2 || got.Items[0].Job != e.Status.Trials[0].Job {
		t.Errorf("dlc experiment trials -o json: %v\n%s", err, out)
	}
	out, err = run("experiment", "trials", name, "--id", "0")
	if err != nil || !strings.Contains(out, e.Status.Trials[0].Job) || !strings.Contains(out, "TRIAL") {
		t.Errorf("dlc experiment trials --id 0: %v\n%s", err, out)
	}
	out, err = run("experiment", "trials", name, "-o", "yaml")
	if err != nil || !strings.Contains(out, "experiment: "+name) {
		t.Errorf("dlc experiment trials -o yaml: %v\n%s", err, out)
	}
}

// waitStartedExperiment waits for an experiment to exist and end.
func waitStartedExperiment(t *testing.T, ctx context.Context, ws, name string) *api.ExperimentDetail {
	t.Helper()
	testutil.Eventually(t, time.Minute, "the trigger starts experiment "+name, func() error {
		_, err := env.api.GetExperiment(ctx, ws, name)
		return err
	})
	return waitExperiment(t, ctx, env.api, ws, name)
}

func triggersOf(t *testing.T, ctx context.Context, ws string) []schemas.Trigger {
	t.Helper()
	l, err := env.api.ListTriggers(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// consumerDrained waits until a consumer of DLC_INBOUND has acknowledged every message
// stored up to now.
func consumerDrained(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	js := env.events.JetStream()
	s, err := js.Stream(ctx, triggers.InboundStream)
	if err != nil {
		t.Fatal(err)
	}
	last := s.CachedInfo().State.LastSeq
	testutil.Eventually(t, time.Minute, "consumer "+name+" acknowledges every inbound message", func() error {
		c, err := js.Consumer(ctx, triggers.InboundStream, name)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < last {
			return fmt.Errorf("ack floor %d < %d", info.AckFloor.Stream, last)
		}
		return nil
	})
}

func mustRegistry(t *testing.T, ctx context.Context) *auth.WorkspaceReader {
	t.Helper()
	r, err := auth.OpenWorkspaceReader(ctx, env.events.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// moveWorkspaceStorage replaces a workspace's storage locations in the registry of the
// stack js is a client of, as an administrator editing the bucket does.
func moveWorkspaceStorage(t *testing.T, ctx context.Context, js *jetstream.Client, ws, loc string) {
	t.Helper()
	kv, err := js.JetStream().KeyValue(ctx, auth.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "workspace."+ws)
	if err != nil {
		t.Fatal(err)
	}
	var reg api.Workspace
	if err := json.Unmarshal(entry.Value(), &reg); err != nil {
		t.Fatal(err)
	}
	reg.Storage = &api.WorkspaceStorage{Locations: []string{loc}}
	data, _ := json.Marshal(reg)
	if _, err := kv.Put(ctx, "workspace."+ws, data); err != nil {
		t.Fatal(err)
	}
}
