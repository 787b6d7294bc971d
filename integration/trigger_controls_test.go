package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workflows"
)

// controlledTriggerDoc is a trigger named name on dlc.<ws>.trigger.<name> with the
// controls (YAML lines of its spec) and a job running command with KEY, COUNT and
// EVENTS in its environment (COUNT and EVENTS only with a debounce).
func controlledTriggerDoc(ws, name, controls, command string, debounced bool) string {
	env := `[{name: KEY, value: "${params.key}"}]`
	if debounced {
		env = `[{name: KEY, value: "${params.key}"}, {name: COUNT, value: "${params.eventCount}"}, {name: EVENTS, value: "${params.events}"}]`
	}
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: %[2]s, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.%[2]s
%[3]s
  params: {key: "${event.data.key}"}
  action:
    job:
      framework: custom
      command: [sh, -c, %[4]q]
      env: %[5]s
      roles: {worker: {replicas: 1}}
`, ws, name, controls, command, env)
}

func keyEvent(source, id, key string) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":%q,"type":"com.example.upload","data":{"key":%q}}`, id, source, key)
}

// gateState queries a trigger's gate.
func gateState(t *testing.T, ctx context.Context, ws, name string) workflows.TriggerGateState {
	t.Helper()
	var st workflows.TriggerGateState
	v, err := env.temporal.QueryWorkflow(ctx, workflows.TriggerGateWorkflowID(ws, name), "", workflows.QueryTriggerGate)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		t.Fatalf("query the gate of %s/%s: %v", ws, name, err)
	}
	return st
}

// jobsOf lists the jobs of workspace ws, sorted by name.
func jobsOf(t *testing.T, ctx context.Context, ws string) []string {
	t.Helper()
	l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range l.Items {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	return names
}

// Ten events within a trigger's debounce window, each delivered twice and read by two
// dispatchers, one of which restarts in the middle, start one run that gets the ten events' params (${params.events}) and
// their count; the gate's state says so.
func TestTriggerDebounceStartsOneRunForTenEvents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	doc := controlledTriggerDoc(ws, "batch", "  debounce: 5s", `echo "key=$KEY count=$COUNT"; echo "events=$EVENTS"`, true)
	if _, err := env.api.ApplyTrigger(ctx, []byte(doc)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Bad controls are refused naming their fields.
	bad := controlledTriggerDoc(ws, "bad", "  debounce: 2h\n  overflow: drop\n  rateLimit: {runs: 1, period: 0s}", "true", false)
	if _, err := env.api.ApplyTrigger(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "spec.debounce") ||
		!strings.Contains(err.Error(), "spec.rateLimit.period") {
		t.Errorf("bad controls: %v, want errors naming spec.debounce and spec.rateLimit.period", err)
	}

	// A second dispatcher: every event reaches the gate twice.
	const second = "dlc-triggers-debounce"
	js := env.events.JetStream()
	svc := service.Compose(ctx, service.Config{Temporal: env.temporal, Storage: &storage.Policy{Workspaces: mustRegistry(t, ctx)}})
	d2, err := triggers.StartDispatcher(ctx, js, svc, triggers.WithConsumer(second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d2.Close(context.Background())
		_ = js.DeleteConsumer(context.Background(), triggers.InboundStream, second)
		_ = js.DeleteConsumer(context.Background(), dlcjs.EventsStream, triggers.OwnEventsConsumer(second))
	})
	testutil.Eventually(t, 10*time.Second, "the second dispatcher loads the trigger", func() error {
		if d2.AppliedRevision() == 0 {
			return fmt.Errorf("revision %d", d2.AppliedRevision())
		}
		return nil
	})

	subject := events.TriggerInboundSubject(ws, "batch")
	var keys []string
	for i := range 10 {
		if i == 5 {
			// The second dispatcher restarts in the middle of the window: what it had
			// not acknowledged comes again.
			if err := d2.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if d2, err = triggers.StartDispatcher(ctx, js, svc, triggers.WithConsumer(second)); err != nil {
				t.Fatal(err)
			}
		}
		key := fmt.Sprintf("uploads/%d.csv", i)
		keys = append(keys, key)
		for range 2 {
			if _, err := js.Publish(ctx, subject, keyEvent("/uploads", fmt.Sprintf("u-%d", i), key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := schemas.TriggerRunName("batch", "/uploads u-0")
	if j := waitTerminal(t, ctx, ws, run); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", run, j.Status.Phase)
	}
	logs := logLines(t, ctx, ws, run)
	var got []map[string]string
	for line := range strings.Lines(logs) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "events="); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatalf("events param %q: %v", rest, err)
			}
		}
	}
	var gotKeys []string
	for _, e := range got {
		gotKeys = append(gotKeys, e["key"])
	}
	// Two dispatchers hand the events over in no set order: the run gets each once, in
	// the order the gate received them, and the params of the last.
	if sorted := slices.Sorted(slices.Values(gotKeys)); !slices.Equal(sorted, keys) {
		t.Errorf("the run's events carry keys %v, want each of %v once", gotKeys, keys)
	} else if !strings.Contains(logs, fmt.Sprintf("key=%s count=10\n", gotKeys[9])) {
		t.Errorf("the run's logs do not show the last event's key %s and the count of 10:\n%s", gotKeys[9], logs)
	}

	inboundDrained(t, ctx)
	consumerDrained(t, ctx, second)
	testutil.Consistently(t, 2*time.Second, "one run for the window", func() error {
		if names := jobsOf(t, ctx, ws); len(names) != 1 {
			return fmt.Errorf("jobs %v, want [%s]", names, run)
		}
		return nil
	}, 200*time.Millisecond)
	if st := gateState(t, ctx, ws, "batch"); st.Events != 10 || st.Started != 1 || st.Window != nil || len(st.Queue) != 0 {
		t.Errorf("gate: %d events, %d started, window %v, queue %d; want 10 events, 1 run", st.Events, st.Started, st.Window, len(st.Queue))
	}
	recordHistory(t, ctx, workflows.TriggerGateWorkflowID(ws, "batch"), "trigger_gate_debounce.json")
}

// maxConcurrentRuns 1 with overflow queue runs three events' runs one after the
// other; with overflow drop, the events that come while a run runs start nothing and
// the gate counts them, and an event after the run ended starts the next.
func TestTriggerMaxConcurrentRunsQueueAndDrop(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	js := env.events.JetStream()
	for _, doc := range []string{
		controlledTriggerDoc(ws, "queued", "  maxConcurrentRuns: 1\n  overflow: queue", `sleep 2; echo "ran $KEY"`, false),
		controlledTriggerDoc(ws, "dropping", "  maxConcurrentRuns: 1\n  overflow: drop", `sleep 6; echo "ran $KEY"`, false),
	} {
		if _, err := env.api.ApplyTrigger(ctx, []byte(doc)); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	for _, name := range []string{"queued", "dropping"} {
		for i := range 3 {
			if _, err := js.Publish(ctx, events.TriggerInboundSubject(ws, name), keyEvent("/"+name, strconv.Itoa(i), fmt.Sprintf("k%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}

	// queue: three runs, one at a time.
	var prev *time.Time
	for i := range 3 {
		run := schemas.TriggerRunName("queued", fmt.Sprintf("/queued %d", i))
		j := waitTerminal(t, ctx, ws, run)
		if j.Status.Phase != schemas.JobSucceeded {
			t.Fatalf("job %s: %s", run, j.Status.Phase)
		}
		if prev != nil && j.Status.StartTime.Before(*prev) {
			t.Errorf("run %d started at %s, before run %d finished at %s", i, j.Status.StartTime, i-1, prev)
		}
		prev = j.Status.FinishTime
	}

	// drop: the first event's run, and nothing for the two that came while it ran.
	first := schemas.TriggerRunName("dropping", "/dropping 0")
	if j := waitTerminal(t, ctx, ws, first); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", first, j.Status.Phase)
	}
	inboundDrained(t, ctx)
	// The API states the drops (GET .../triggers/dropping/status).
	testutil.Eventually(t, itest.Left(ctx), "the dropping gate to see its run end", func() error {
		st, err := env.api.GetTriggerStatus(ctx, ws, "dropping")
		if err != nil {
			return err
		}
		if !st.Gate || st.Events != 3 || st.Started != 1 || st.Dropped != 2 || len(st.Running) != 0 || len(st.RecentDrops) != 2 ||
			!strings.Contains(st.RecentDrops[0].Reason, "maxConcurrentRuns") || st.RecentDrops[0].FirstEvent != "/dropping 1" {
			return fmt.Errorf("status: %+v", st)
		}
		return nil
	}, itest.PollInterval)
	if _, err := js.Publish(ctx, events.TriggerInboundSubject(ws, "dropping"), keyEvent("/dropping", "3", "k3")); err != nil {
		t.Fatal(err)
	}
	next := schemas.TriggerRunName("dropping", "/dropping 3")
	if j := waitTerminal(t, ctx, ws, next); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", next, j.Status.Phase)
	}
	inboundDrained(t, ctx)
	if got, err := triggeredJobs(ctx, ws, "dropping"); err != nil || len(got) != 2 {
		t.Errorf("dropping's jobs %v (err %v), want %s and %s", got, err, first, next)
	}
	if st, err := env.api.GetTriggerStatus(ctx, ws, "queued"); err != nil || st.Started != 3 || st.Dropped != 0 || st.Queued != 0 {
		t.Errorf("queued's status: %+v, %v; want 3 started, nothing dropped or queued", st, err)
	}
	if got, err := triggeredJobs(ctx, ws, "queued"); err != nil || len(got) != 3 {
		t.Errorf("queued's jobs %v (err %v), want 3", got, err)
	}
	recordHistory(t, ctx, workflows.TriggerGateWorkflowID(ws, "dropping"), "trigger_gate_drop.json")
}

// A rate limit of one run per 5s with overflow queue starts the second event's run 5s
// or more after the first's, and starts both.
func TestTriggerRateLimitQueues(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	doc := controlledTriggerDoc(ws, "limited", "  rateLimit: {runs: 1, period: 5s}", `echo "ran $KEY"`, false)
	if _, err := env.api.ApplyTrigger(ctx, []byte(doc)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	js := env.events.JetStream()
	for i := range 2 {
		if _, err := js.Publish(ctx, events.TriggerInboundSubject(ws, "limited"), keyEvent("/limited", strconv.Itoa(i), fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		run := schemas.TriggerRunName("limited", fmt.Sprintf("/limited %d", i))
		if j := waitTerminal(t, ctx, ws, run); j.Status.Phase != schemas.JobSucceeded {
			t.Fatalf("job %s: %s", run, j.Status.Phase)
		}
		if logs := logLines(t, ctx, ws, run); !strings.Contains(logs, fmt.Sprintf("ran k%d\n", i)) {
			t.Errorf("run %d's logs:\n%s", i, logs)
		}
	}
	if st := gateState(t, ctx, ws, "limited"); st.Started != 2 || st.Events != 2 {
		t.Errorf("gate: %d events, %d started; want 2 and 2", st.Events, st.Started)
	}
	// Each start published its fired event while it started: the second came at least
	// the period after the first (the gate let it start only then).
	fired, _ := streamEvents[events.TriggerFiredData](t, ctx, env.events, events.TriggerFiredSubject(ws, "limited"))
	if len(fired) != 2 || fired[1].Time.Sub(fired[0].Time) < 5*time.Second {
		t.Errorf("fired events %+v: want 2, 5s or more apart", fired)
	}
}
