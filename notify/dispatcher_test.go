package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// TestWebhookDeliversSignedEventsInOrder: a rule of workspace a receives the phase
// events it matches, signed, each job's in order, and nothing else.
func TestWebhookDeliversSignedEventsInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, func(*http.Request, int) int {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // let lanes race
		return http.StatusOK
	})
	d := e.start()
	e.put(d, webhookRule("a", "phases", rc.url(), func(r *schemas.NotificationRule) {
		r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobRunning, schemas.JobRestarting, schemas.JobSucceeded, schemas.JobFailed}
	}))

	start := time.Now()
	want := map[string][]string{}
	var all []published
	for seq := 1; seq <= 12; seq++ {
		for _, job := range []string{"j1", "j2", "j3"} {
			phase := schemas.JobRunning
			switch {
			case seq == 1:
				phase = schemas.JobPending
			case seq == 12 && job == "j3":
				phase = schemas.JobFailed
			case seq == 12:
				phase = schemas.JobSucceeded
			case seq%2 == 1:
				phase = schemas.JobRestarting
			}
			p := e.phase("a", job, seq, phase, map[string]string{"team": "cv"})
			all = append(all, p)
			if phase != schemas.JobPending {
				want[job] = append(want[job], p.id)
			}
		}
		e.metric("a", "j1", int64(seq)) // not a phase event: not delivered
	}
	rc.waitDelivered(33)
	t.Logf("33 events delivered in %v", time.Since(start).Round(time.Millisecond))
	e.waitProcessed("a")

	got := map[string][]string{}
	byID := map[string][]byte{}
	for _, p := range all {
		byID[p.id] = p.data
	}
	for _, r := range rc.all() {
		got[r.phase.Job] = append(got[r.phase.Job], r.eventID)
		if !notify.VerifySignature([]byte(testSecret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("event %s: signature %q does not verify", r.eventID, r.header.Get(notify.HeaderSignature))
		}
		if notify.VerifySignature([]byte("another secret"), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("event %s: signature verifies with the wrong secret", r.eventID)
		}
		if diff := cmp.Diff(string(byID[r.eventID]), string(r.body)); diff != "" {
			t.Errorf("event %s: body is not the published event (-published +got):\n%s", r.eventID, diff)
		}
		wantHeaders := map[string]string{"Content-Type": notify.ContentType, notify.HeaderAttempt: "1", notify.HeaderRule: "a/phases"}
		gotHeaders := map[string]string{}
		for k := range wantHeaders {
			gotHeaders[k] = r.header.Get(k)
		}
		if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
			t.Errorf("event %s: headers (-want +got):\n%s", r.eventID, diff)
		}
	}
	wantEqual(t, "deliveries per job, in arrival order", want, got)
}

// TestWebhookRetriesThenSucceeds: a receiver that fails twice gets the event on attempt 3,
// and no more.
func TestWebhookRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, func(_ *http.Request, prior int) int {
		if prior < 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	d := e.start()
	e.put(d, webhookRule("a", "retry", rc.url()))
	start := time.Now()
	p := e.phase("a", "j", 1, schemas.JobFailed, nil)
	rc.waitDelivered(1)
	t.Logf("delivered on the third attempt after %v", time.Since(start).Round(time.Millisecond))
	e.waitProcessed("a")

	type attempt struct {
		ID       string
		Attempt  string
		Status   int
		Verified bool
	}
	var got []attempt
	for _, r := range rc.all() {
		got = append(got, attempt{r.eventID, r.header.Get(notify.HeaderAttempt), r.status,
			notify.VerifySignature([]byte(testSecret), r.body, r.header.Get(notify.HeaderSignature))})
	}
	want := []attempt{{p.id, "1", 500, true}, {p.id, "2", 500, true}, {p.id, "3", 200, true}}
	wantEqual(t, "requests", want, got)
}

// TestDeadLetterAfterMaxAttempts: a permanently failing endpoint's events land, in order,
// in the dead-letter subject after maxAttempts, and are acknowledged.
func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	d := e.start()
	rule := webhookRule("a", "down", rc.url(), func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 3 })
	e.put(d, rule)
	start := time.Now()
	p1 := e.phase("a", "j", 1, schemas.JobRunning, nil)
	p2 := e.phase("a", "j", 2, schemas.JobFailed, nil)

	const subject = "dlc.a.notify.deadletter"
	var msgs []*jetstream.RawStreamMsg
	testutil.Eventually(t, notifyWait, "2 dead letters", func() bool { msgs = e.notifyMsgs(subject); return len(msgs) == 2 })
	t.Logf("2 events dead-lettered after 3 attempts each in %v", time.Since(start).Round(time.Millisecond))
	e.waitProcessed("a")

	type letter struct {
		MsgID, EventID, Workspace, Rule, Target, Destination, Error, Event string
		Attempts                                                           int
		Ordered                                                            bool
	}
	var got []letter
	for _, m := range msgs {
		var dl notify.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			t.Fatal(err)
		}
		got = append(got, letter{m.Header.Get(jetstream.MsgIDHeader), dl.EventID, dl.Workspace, dl.Rule, dl.Target,
			dl.Destination, dl.Error, string(dl.Event), dl.Attempts,
			dl.StreamSequence > 0 && !dl.FirstAttempt.IsZero() && !dl.LastAttempt.Before(dl.FirstAttempt)})
	}
	wantLetter := func(p published) letter {
		return letter{p.id + ":down:webhook:deadletter", p.id, "a", "down", "webhook", rc.url(),
			"HTTP 503 Service Unavailable", string(p.data), 3, true}
	}
	wantEqual(t, "dead letters", []letter{wantLetter(p1), wantLetter(p2)}, got)
	var attempts []string
	for _, r := range rc.all() {
		attempts = append(attempts, r.eventID+"#"+r.header.Get(notify.HeaderAttempt))
	}
	wantAttempts := []string{p1.id + "#1", p1.id + "#2", p1.id + "#3", p2.id + "#1", p2.id + "#2", p2.id + "#3"}
	wantEqual(t, "requests", wantAttempts, attempts)
}

// TestSubjectForwarding: events are forwarded to a subject a stream keeps, with
// Nats-Msg-Id <event id>:<rule> so repeats are dropped, and to a plain NATS subject.
func TestSubjectForwarding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub, err := e.js.Conn().SubscribeSync("team.alerts")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	d := e.start()
	forward := func(name, subject string) *schemas.NotificationRule {
		return webhookRule("a", name, "", func(r *schemas.NotificationRule) {
			r.Spec.Webhook = nil
			r.Spec.Subject = subject
			r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobSucceeded, schemas.JobFailed}
		})
	}
	e.put(d, forward("stored", "dlc.a.notify.cv"))
	e.put(d, forward("plain", "team.alerts"))
	e.phase("a", "j1", 1, schemas.JobRunning, nil)
	p1 := e.phase("a", "j1", 2, schemas.JobSucceeded, nil)
	p2 := e.phase("a", "j2", 1, schemas.JobFailed, nil)

	var stored []*jetstream.RawStreamMsg
	testutil.Eventually(t, notifyWait, "2 forwarded events stored", func() bool { stored = e.notifyMsgs("dlc.a.notify.cv"); return len(stored) == 2 })
	var gotStored []string
	for _, m := range stored {
		gotStored = append(gotStored, m.Header.Get(jetstream.MsgIDHeader)+" "+string(m.Data))
	}
	slices.Sort(gotStored) // two jobs: no order between them
	wantStored := []string{p1.id + ":stored " + string(p1.data), p2.id + ":stored " + string(p2.data)}
	slices.Sort(wantStored)
	wantEqual(t, "forwarded to dlc.a.notify.cv", wantStored, gotStored)

	var gotPlain []string
	for range 2 {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("team.alerts: %v", err)
		}
		gotPlain = append(gotPlain, m.Header.Get(jetstream.MsgIDHeader)+" "+m.Header.Get(notify.HeaderRule)+" "+string(m.Data))
	}
	slices.Sort(gotPlain)
	wantPlain := []string{p1.id + ":plain a/plain " + string(p1.data), p2.id + ":plain a/plain " + string(p2.data)}
	slices.Sort(wantPlain)
	wantEqual(t, "forwarded to team.alerts", wantPlain, gotPlain)

	// A forward repeated (by a restarted dispatcher) carries the same id: dropped.
	ack, err := e.js.Publish(e.ctx, "dlc.a.notify.cv", p1.data, jetstream.WithMsgID(p1.id+":stored"))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Duplicate {
		t.Errorf("a repeated forward was stored again")
	}
	e.waitProcessed("a")
}

// TestWorkspaceIsolation: a rule sees only the events of its own workspace.
func TestWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ra := newReceiver(t, ok)
	rb := newReceiver(t, ok)
	d := e.start()
	e.put(d, webhookRule("a", "all", ra.url()))
	e.put(d, webhookRule("b", "all", rb.url()))
	a1 := e.phase("a", "j", 1, schemas.JobRunning, nil)
	b1 := e.phase("b", "j", 1, schemas.JobRunning, nil)
	a2 := e.phase("a", "j", 2, schemas.JobFailed, nil)
	e.phase("c", "j", 1, schemas.JobFailed, nil) // a workspace without rules
	e.waitProcessed("a")
	e.waitProcessed("b")

	wantEqual(t, "workspace a's receiver", ids(a1, a2), ra.delivered())
	wantEqual(t, "workspace b's receiver", ids(b1), rb.delivered())
	for _, r := range rb.all() {
		if got := r.header.Get(notify.HeaderRule); got != "b/all" {
			t.Errorf("rule header %q, want b/all", got)
		}
	}
	if _, err := e.consumer("c"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("workspace c, without rules, has a consumer: %v", err)
	}
}

// TestLabelAndPhaseFilters: only events with the rule's phases and all its labels are
// delivered.
func TestLabelAndPhaseFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start()
	e.put(d, webhookRule("a", "cv-failures", rc.url(), func(r *schemas.NotificationRule) {
		r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobFailed}
		r.Spec.Match.Labels = map[string]string{"team": "cv", "tier": "prod"}
	}))
	cvProd := map[string]string{"team": "cv", "tier": "prod", "owner": "alice"}
	match1 := e.phase("a", "j1", 1, schemas.JobFailed, cvProd)
	e.phase("a", "j2", 1, schemas.JobFailed, map[string]string{"team": "nlp", "tier": "prod"})
	e.phase("a", "j3", 1, schemas.JobSucceeded, cvProd)
	e.phase("a", "j4", 1, schemas.JobFailed, nil)
	e.phase("a", "j5", 1, schemas.JobFailed, map[string]string{"team": "cv"})
	e.metric("a", "j1", 1)
	match2 := e.phase("a", "j6", 1, schemas.JobFailed, cvProd)
	e.waitProcessed("a")

	got := rc.delivered()
	slices.Sort(got)
	want := ids(match1, match2)
	slices.Sort(want)
	wantEqual(t, "delivered", want, got)
}

// TestRestartResumesWithoutLossOrDuplicates: events published while the dispatcher is
// down are delivered when it is back, and none twice.
func TestRestartResumesWithoutLossOrDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d1 := e.start()
	e.put(d1, webhookRule("a", "all", rc.url()))
	want := e.running("a", "j", 1, 5)
	rc.waitDelivered(5)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := d1.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	want = append(want, e.running("a", "j", 6, 10)...)
	e.restartDelivers(rc, "a", want, "5 events published while down delivered")
	if n := len(rc.all()); n != 10 {
		t.Errorf("%d requests, want 10", n)
	}
}

// TestCrashMidDeliveryRedeliversInOrder: a dispatcher stopped while an event is being
// delivered leaves it unacknowledged; the next one delivers it again, then the rest, in
// order.
func TestCrashMidDeliveryRedeliversInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var inFlight atomic.Bool
	const third = "a-j-uid:status:3" // the id e.phase gives event 3 of job j in workspace a
	rc := newReceiver(t, func(r *http.Request, prior int) int {
		if r.Header.Get(notify.HeaderEventID) == third && prior == 0 {
			inFlight.Store(true)
			<-r.Context().Done() // hang until the dispatcher gives up
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	d1 := e.start()
	e.put(d1, webhookRule("a", "all", rc.url()))
	want := e.running("a", "j", 1, 5)
	testutil.Eventually(t, notifyWait, "event 3 in flight", inFlight.Load)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel() // give up at once: like a crash, deliveries under way are abandoned
	if err := d1.Close(ctx); err == nil {
		t.Errorf("Close reported no abandoned delivery")
	} else {
		t.Logf("Close: %v", err)
	}
	want = append(want, e.phase("a", "j", 6, schemas.JobSucceeded, nil).id)
	e.restartDelivers(rc, "a", want, "redelivered from event 3 on")
	var attempts []string
	for _, r := range rc.all() {
		attempts = append(attempts, r.header.Get(notify.HeaderAttempt))
	}
	// Event 3: attempt 1 abandoned, attempt 1 again by the new dispatcher.
	wantEqual(t, "attempt headers", []string{"1", "1", "1", "1", "1", "1", "1"}, attempts)
}

// TestRuleChangesApplyLive: updating, deleting and creating rules in the bucket changes
// deliveries without a restart; a rule created after a time without rules does not see
// the events of that time.
func TestRuleChangesApplyLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := newReceiver(t, ok)
	second := newReceiver(t, ok)
	third := newReceiver(t, ok)
	d := e.start()
	e.put(d, webhookRule("a", "r", first.url(), func(r *schemas.NotificationRule) {
		r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobFailed}
	}))
	e.phase("a", "j1", 1, schemas.JobSucceeded, nil)
	e.waitProcessed("a")

	start := time.Now()
	e.put(d, webhookRule("a", "r", second.url(), func(r *schemas.NotificationRule) {
		r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobSucceeded}
	}))
	t.Logf("rule update applied in %v", time.Since(start).Round(time.Millisecond))
	p2 := e.phase("a", "j2", 1, schemas.JobSucceeded, nil)
	second.waitDelivered(1)
	e.waitProcessed("a")

	if err := e.store.Delete(e.ctx, "a", "r"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, notifyWait, "workspace a's consumer deleted", func() bool {
		_, err := e.consumer("a")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	e.phase("a", "j3", 1, schemas.JobSucceeded, nil) // no rule: never delivered
	e.put(d, webhookRule("a", "r2", third.url()))
	p4 := e.phase("a", "j4", 1, schemas.JobSucceeded, nil)
	e.waitProcessed("a")

	got := map[string][]string{"first": first.delivered(), "second": second.delivered(), "third": third.delivered()}
	want := map[string][]string{"first": nil, "second": ids(p2), "third": ids(p4)}
	wantEqual(t, "delivered per receiver", want, got)
}

// TestRuleFixDuringBackoffRetriesAtOnce: correcting a failing rule's URL takes effect at
// the next attempt, without waiting out the backoff.
func TestRuleFixDuringBackoffRetriesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	broken := newReceiver(t, func(*http.Request, int) int { return http.StatusNotFound })
	fixed := newReceiver(t, ok)
	d := e.start()
	slow := func(r *schemas.NotificationRule) {
		r.Spec.Delivery = schemas.DeliveryPolicy{MaxAttempts: 3,
			Backoff: schemas.Backoff{Initial: schemas.Duration(time.Hour), Max: schemas.Duration(time.Hour)}}
	}
	e.put(d, webhookRule("a", "r", broken.url(), slow))
	p := e.phase("a", "j", 1, schemas.JobFailed, nil)
	testutil.Eventually(t, notifyWait, "first attempt", func() bool { return len(broken.all()) == 1 })
	start := time.Now()
	e.put(d, webhookRule("a", "r", fixed.url(), slow))
	fixed.waitDelivered(1)
	t.Logf("delivered %v after the fix (backoff 1h)", time.Since(start).Round(time.Millisecond))
	e.waitProcessed("a")
	wantEqual(t, "delivered", ids(p), fixed.delivered())
	if got := fixed.all()[0].header.Get(notify.HeaderAttempt); got != "2" {
		t.Errorf("attempt header %q, want 2", got)
	}
}

// TestSlowWorkspaceDoesNotBlockOthers: endpoints of one workspace that hang do not hold
// up another workspace's deliveries.
func TestSlowWorkspaceDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	slow := newReceiver(t, func(r *http.Request, _ int) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	fast := newReceiver(t, ok)
	d := e.start(notify.WithConcurrency(2, 1))
	e.put(d, webhookRule("slow", "all", slow.url()))
	e.put(d, webhookRule("fast", "all", fast.url()))
	for _, job := range []string{"j1", "j2", "j3"} {
		e.phase("slow", job, 1, schemas.JobRunning, nil)
	}
	testutil.Eventually(t, notifyWait, "a hanging request", func() bool { return len(slow.all()) == 1 })
	start := time.Now()
	p := e.phase("fast", "j", 1, schemas.JobRunning, nil)
	fast.waitDelivered(1)
	t.Logf("workspace fast delivered in %v while workspace slow hangs", time.Since(start).Round(time.Millisecond))
	wantEqual(t, "fast delivered", ids(p), fast.delivered())
	if n := len(slow.all()); n != 1 {
		t.Errorf("slow workspace has %d requests in flight, want 1 (its bound)", n)
	}
	close(release)
	slow.waitDelivered(3)
	e.waitProcessed("slow")
}

// TestSecretRef: a webhook's secretRef is resolved by the SecretSource; one it cannot
// resolve is dead-lettered.
func TestSecretRef(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := []byte("a key held outside the rule")
	rc := newReceiver(t, ok)
	d := e.start(notify.WithSecrets(notify.StaticSecrets{"a/hook-key": key}))
	ref := func(name string) func(r *schemas.NotificationRule) {
		return func(r *schemas.NotificationRule) {
			r.Spec.Webhook.Secret = ""
			r.Spec.Webhook.SecretRef = &schemas.SecretRef{Name: name}
			r.Spec.Delivery.MaxAttempts = 2
		}
	}
	e.put(d, webhookRule("a", "known", rc.url(), ref("hook-key")))
	e.put(d, webhookRule("a", "unknown", rc.url(), ref("missing")))
	p := e.phase("a", "j", 1, schemas.JobFailed, nil)
	rc.waitDelivered(1)
	var letters []*jetstream.RawStreamMsg
	testutil.Eventually(t, notifyWait, "a dead letter", func() bool { letters = e.notifyMsgs("dlc.a.notify.deadletter"); return len(letters) == 1 })
	e.waitProcessed("a")

	r := rc.all()[0]
	if !notify.VerifySignature(key, r.body, r.header.Get(notify.HeaderSignature)) {
		t.Errorf("signature does not verify with the referenced key")
	}
	if got := r.header.Get(notify.HeaderRule); got != "a/known" {
		t.Errorf("delivered by rule %q, want a/known", got)
	}
	var dl notify.DeadLetter
	if err := json.Unmarshal(letters[0].Data, &dl); err != nil {
		t.Fatal(err)
	}
	if dl.Rule != "unknown" || dl.EventID != p.id || !strings.Contains(dl.Error, "secret not found") {
		t.Errorf("dead letter: rule %q, event %q, error %q", dl.Rule, dl.EventID, dl.Error)
	}
	if n := len(rc.all()); n != 1 {
		t.Errorf("%d requests, want 1: an unsigned request must never be sent", n)
	}
}

// TestDeletedConsumerIsRecreated: a workspace consumer deleted behind the dispatcher's
// back is created again, and delivery goes on (events since the rule was created may
// come again: at least once). A pull request of the old consumer's reader sometimes
// takes the new consumer's first event to a closed inbox, from where it comes back
// after the ack wait: 1s here.
func TestDeletedConsumerIsRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start(notify.WithAckWait(time.Second))
	e.put(d, webhookRule("a", "all", rc.url()))
	p1 := e.phase("a", "j", 1, schemas.JobRunning, nil)
	rc.waitDelivered(1)
	e.waitProcessed("a")
	c, err := e.consumer("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(e.ctx, dlcjs.EventsStream, c.CachedInfo().Name); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p2 := e.phase("a", "j", 2, schemas.JobFailed, nil)
	testutil.Eventually(t, notifyWait, "event 2 delivered", func() bool { return slices.Contains(rc.delivered(), p2.id) })
	t.Logf("delivered %v after the consumer was deleted", time.Since(start).Round(time.Millisecond))
	e.waitProcessed("a")
	got := slices.Compact(rc.delivered())
	wantEqual(t, "delivered, repeats removed", ids(p1, p2), got)
}
