package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/jstest"
	"github.com/opendlc/opendlc/schemas"
)

// crashingKV fails its next Put once armed: an evaluator that dies after it published
// an alert event and before it stored the state.
type crashingKV struct {
	jetstream.KeyValue
	armed atomic.Bool
}

var errCrash = errors.New("crashed before the state was stored")

func (k *crashingKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if k.armed.CompareAndSwap(true, false) {
		return 0, errCrash
	}
	return k.KeyValue.Put(ctx, key, value)
}

// TestAlertCrashBetweenPublishAndStateNotifiesOnce: an evaluator that published a
// firing alert but died before storing its state is replaced by one that reads the same
// event again (JetStream redelivers what was not acknowledged): it publishes the alert
// with the same id, which the stream drops, so the alert is in DLC_EVENTS once; the
// resolution follows once.
func TestAlertCrashBetweenPublishAndStateNotifiesOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, _ := jstest.Start(t, ctx)
	js := c.JetStream()
	stream, err := js.Stream(ctx, dlcjs.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, AlertsBucket)
	if err != nil {
		t.Fatal(err)
	}
	below := 10.0
	rules := map[string]*ruleEntry{"idle": {created: time.Now().Add(-time.Hour), rule: &schemas.NotificationRule{
		Metadata: schemas.ObjectMeta{Name: "idle", Workspace: "a"},
		Spec: schemas.NotificationRuleSpec{Alert: &schemas.NotificationAlert{
			Metric: events.ResourceGPUUtilization, Below: &below, For: schemas.Duration(time.Second)}},
	}}}
	ruleOf := func(string) map[string]*ruleEntry { return rules }
	log := slog.New(slog.DiscardHandler)

	t0 := time.Now().Truncate(time.Second)
	seq := uint64(0)
	ev := func(typ, subject string, at time.Time, data any) *event {
		t.Helper()
		seq++
		e, err := events.New(fmt.Sprintf("e%d", seq), typ, "a", "/src", "j", at, data)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		pe, err := parseEvent(subject, raw)
		if err != nil {
			t.Fatal(err)
		}
		pe.seq = seq
		return pe
	}
	running := ev(events.TypeJobPhase, events.JobStatusSubject("a", "j"), t0, events.JobPhaseData{Job: "j", Phase: "Running"})
	sample := func(at time.Time, util float64) *event {
		return ev(events.TypeJobResources, events.JobResourcesSubject("a", "j"), at,
			events.ResourceData{Job: "j", Replica: "worker-0", GPUs: []events.GPUSample{{Utilization: util}}})
	}
	s1, s2, s3 := sample(t0, 1), sample(t0.Add(time.Second), 2), sample(t0.Add(2*time.Second), 50)

	crashing := &crashingKV{KeyValue: kv}
	a1 := newAlerter(js, stream, crashing, ruleOf, log)
	for _, e := range []*event{running, s1} {
		if err := a1.observe(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	crashing.armed.Store(true)
	if err := a1.observe(ctx, s2); !errors.Is(err, errCrash) {
		t.Fatalf("observe the firing sample: %v, want the crash", err)
	}
	alertsIn := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.AlertSubject("a", "idle")))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[events.AlertSubject("a", "idle")]
	}
	if n := alertsIn(); n != 1 {
		t.Fatalf("%d alert events published before the crash, want 1", n)
	}

	// The next evaluator reads the unacknowledged sample again.
	a2 := newAlerter(js, stream, kv, ruleOf, log)
	for _, e := range []*event{running, s2} {
		if err := a2.observe(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if n := alertsIn(); n != 1 {
		t.Errorf("%d alert events after the restart, want 1: the firing was published again", n)
	}
	if err := a2.observe(ctx, s3); err != nil {
		t.Fatal(err)
	}
	if n := alertsIn(); n != 2 {
		t.Errorf("%d alert events after the resolving sample, want 2", n)
	}
	// And a sample read again after that is not applied twice.
	if err := a2.observe(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if n := alertsIn(); n != 2 {
		t.Errorf("%d alert events after an old sample was read again, want 2", n)
	}
}
