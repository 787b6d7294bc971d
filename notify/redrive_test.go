package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// deadLetters returns the dead letters on ws's default dead-letter subject with their
// DLC_NOTIFY sequences.
func (e *env) deadLetters(ws string) (map[uint64]notify.DeadLetter, []uint64) {
	e.t.Helper()
	out := map[uint64]notify.DeadLetter{}
	var seqs []uint64
	for _, m := range e.notifyMsgs(schemas.DefaultDeadLetterSubject(ws)) {
		var l notify.DeadLetter
		if err := json.Unmarshal(m.Data, &l); err != nil {
			e.t.Fatal(err)
		}
		out[m.Sequence] = l
		seqs = append(seqs, m.Sequence)
	}
	return out, seqs
}

// TestRedriveDeliversDeadLettersOnce: a delivery that failed every attempt is
// dead-lettered; once the receiver works, a redrive delivers it again, signed as
// before, exactly once: a second redrive queues nothing, a redrive queued while no
// dispatcher runs is delivered by the next one, and another rule's dead letters on the
// same subject and another workspace's are not touched.
func TestRedriveDeliversDeadLettersOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var failing atomic.Bool
	failing.Store(true)
	rc := newReceiver(t, func(*http.Request, int) int {
		if failing.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	other := newReceiver(t, func(*http.Request, int) int { return http.StatusInternalServerError })
	d := e.start()
	few := func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 2 }
	e.put(d, webhookRule("a", "hook", rc.url(), few))
	e.put(d, webhookRule("a", "other", other.url(), few))
	e.put(d, webhookRule("b", "hook", other.url(), few))
	p1 := e.failed("a", "j1", 1)
	p2 := e.failed("a", "j2", 1)
	e.failed("b", "j1", 1)
	testutil.Eventually(t, notifyWait, "four dead letters in a, one in b", func() error {
		_, a := e.deadLetters("a")
		_, b := e.deadLetters("b")
		if len(a) != 4 || len(b) != 1 {
			return fmt.Errorf("%d in a, %d in b", len(a), len(b))
		}
		return nil
	})
	e.waitProcessed("a")
	failedBefore := len(rc.all())
	wantEqual(t, "failed attempts before the redrive", 4, failedBefore)

	redriver, err := notify.OpenRedriver(e.ctx, e.js, e.store)
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(false)
	// One dead letter now, with the dispatcher running.
	res, err := redriver.Redrive(e.ctx, "a", "hook", 1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Queued) != 1 || !res.More || res.AlreadyQueued != 0 {
		t.Fatalf("first redrive: %+v, want one queued and more left", res)
	}
	rc.waitDelivered(1)

	// The other one while no dispatcher runs: the next one delivers it.
	if err := d.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	res, err = redriver.Redrive(e.ctx, "a", "hook", 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Queued) != 1 || res.More || res.AlreadyQueued != 1 {
		t.Fatalf("second redrive: %+v, want one queued, one already queued", res)
	}
	e.start()
	rc.waitDelivered(2)

	// A third redrive, and one of another workspace's rule of the same name, queue
	// nothing of a's: every delivery happened once.
	res, err = redriver.Redrive(e.ctx, "a", "hook", 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "third redrive", []any{0, 2}, []any{len(res.Queued), res.AlreadyQueued})
	if _, err := redriver.Redrive(e.ctx, "b", "hook", 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, 2*time.Second, "no repeated delivery", func() error {
		if got := rc.delivered(); len(got) != 2 {
			return fmt.Errorf("delivered %v", got)
		}
		return nil
	})
	got := rc.delivered()
	wantEqual(t, "redriven events", map[string]bool{p1.id: true, p2.id: true}, map[string]bool{got[0]: true, got[1]: true})
	byID := map[string][]byte{p1.id: p1.data, p2.id: p2.data}
	for _, r := range rc.all()[failedBefore:] {
		if !notify.VerifySignature([]byte(testSecret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("redriven %s: signature does not verify", r.eventID)
		}
		wantEqual(t, "redriven body", string(byID[r.eventID]), string(r.body))
	}
	// a's other rule was not redriven: its receiver saw only the two attempts of each
	// first delivery. b's rule of the same name was redriven by b's redrive only, and
	// failed again (two more attempts, a dead letter of its own).
	testutil.Eventually(t, notifyWait, "b's redrive dead-lettered again", func() error {
		if _, b := e.deadLetters("b"); len(b) != 2 {
			return fmt.Errorf("%d dead letters in b", len(b))
		}
		return nil
	})
	byRule := map[string]int{}
	for _, r := range other.all() {
		byRule[r.header.Get(notify.HeaderRule)]++
	}
	wantEqual(t, "requests of the other rules", map[string]int{"a/other": 4, "b/hook": 4}, byRule)
}

// TestRedriveRefusesBadRequests: an unknown rule, a bad limit, and a dead letter that
// does not match the event at its sequence (which only a forger writes) queue or
// deliver nothing.
func TestRedriveRefusesBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start()
	e.put(d, webhookRule("a", "hook", rc.url()))
	redriver, err := notify.OpenRedriver(e.ctx, e.js, e.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redriver.Redrive(e.ctx, "a", "nope", 0, time.Time{}); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("unknown rule: %v, want ErrNotFound", err)
	}
	if _, err := redriver.Redrive(e.ctx, "a", "hook", 1001, time.Time{}); !errors.Is(err, notify.ErrInvalidRedrive) {
		t.Errorf("limit 1001: %v, want ErrInvalidRedrive", err)
	}
	// An event of a, delivered, and a dead letter that claims another body for it.
	p := e.failed("a", "j", 1)
	rc.waitDelivered(1)
	e.waitProcessed("a")
	forged, _ := json.Marshal(notify.DeadLetter{Event: json.RawMessage(`{"id":"x"}`), EventID: "forged", StreamSequence: 1,
		Workspace: "a", Rule: "hook", Target: "webhook"})
	if _, err := e.js.Publish(e.ctx, schemas.DefaultDeadLetterSubject("a"), forged); err != nil {
		t.Fatal(err)
	}
	// A redrive since a time after every dead letter queues none.
	res, err := redriver.Redrive(e.ctx, "a", "hook", 0, time.Now().Add(time.Hour))
	if err != nil || len(res.Queued) != 0 || res.AlreadyQueued != 0 || res.More {
		t.Fatalf("redrive since an hour ahead: %+v %v", res, err)
	}
	res, err = redriver.Redrive(e.ctx, "a", "hook", 0, time.Now().Add(-time.Hour))
	if err != nil || len(res.Queued) != 1 {
		t.Fatalf("redrive: %+v %v", res, err)
	}
	kv, err := e.js.KeyValue(e.ctx, notify.RedriveBucket)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("a.hook.%d", res.Queued[0])
	testutil.Eventually(t, notifyWait, "the forged dead letter refused", func() error {
		en, err := kv.Get(context.Background(), key)
		if err != nil {
			return err
		}
		var rec struct{ State, Outcome string }
		_ = json.Unmarshal(en.Value(), &rec)
		if rec.State != "done" || rec.Outcome != "refused" {
			return fmt.Errorf("record %s", en.Value())
		}
		return nil
	})
	wantEqual(t, "deliveries", []string{p.id}, rc.delivered())
}
