package triggers_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
)

func TestVerifyWebhook(t *testing.T) {
	secret := []byte("0123456789abcdef-secret")
	body := []byte(`{"ref":"refs/heads/main"}`)
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	signed := func(ts, delivery string, body []byte) http.Header {
		h := http.Header{}
		h.Set(triggers.HeaderTimestamp, ts)
		h.Set(triggers.HeaderDelivery, delivery)
		h.Set(triggers.HeaderSignature, triggers.SignWebhook(secret, ts, delivery, body))
		return h
	}
	if d, err := triggers.VerifyWebhook(secret, signed(ts, "d-1", body), body, now); err != nil || d != "d-1" {
		t.Fatalf("a signed request: %q, %v", d, err)
	}
	// Within the window, either way.
	if _, err := triggers.VerifyWebhook(secret, signed(ts, "d-1", body), body, now.Add(4*time.Minute)); err != nil {
		t.Errorf("4 minutes later: %v", err)
	}
	if _, err := triggers.VerifyWebhook(secret, signed(ts, "d-1", body), body, now.Add(-4*time.Minute)); err != nil {
		t.Errorf("4 minutes earlier: %v", err)
	}

	retimed := signed(ts, "d-1", body)
	retimed.Set(triggers.HeaderTimestamp, strconv.FormatInt(now.Unix()+60, 10))
	redelivered := signed(ts, "d-1", body)
	redelivered.Set(triggers.HeaderDelivery, "d-2")
	otherKey := signed(ts, "d-1", body)
	otherKey.Set(triggers.HeaderSignature, triggers.SignWebhook([]byte("another-secret-of-16"), ts, "d-1", body))
	noSig := signed(ts, "d-1", body)
	noSig.Del(triggers.HeaderSignature)
	for name, tc := range map[string]struct {
		h          http.Header
		body       []byte
		now        time.Time
		wantStatus int
		wantHeader string
	}{
		"old timestamp":          {signed(ts, "d-1", body), body, now.Add(6 * time.Minute), http.StatusUnauthorized, triggers.HeaderTimestamp},
		"future timestamp":       {signed(ts, "d-1", body), body, now.Add(-6 * time.Minute), http.StatusUnauthorized, triggers.HeaderTimestamp},
		"body changed":           {signed(ts, "d-1", body), []byte(`{"ref":"refs/heads/evil"}`), now, http.StatusUnauthorized, triggers.HeaderSignature},
		"timestamp changed":      {retimed, body, now, http.StatusUnauthorized, triggers.HeaderSignature},
		"delivery changed":       {redelivered, body, now, http.StatusUnauthorized, triggers.HeaderSignature},
		"another key":            {otherKey, body, now, http.StatusUnauthorized, triggers.HeaderSignature},
		"no signature":           {noSig, body, now, http.StatusUnauthorized, triggers.HeaderSignature},
		"bad delivery id":        {signed(ts, "a b", body), body, now, http.StatusBadRequest, triggers.HeaderDelivery},
		"timestamp not a number": {signed("yesterday", "d-1", body), body, now, http.StatusBadRequest, triggers.HeaderTimestamp},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := triggers.VerifyWebhook(secret, tc.h, tc.body, tc.now)
			we, ok := errors.AsType[*triggers.WebhookError](err)
			if !ok || we.Status != tc.wantStatus || we.Header != tc.wantHeader {
				t.Fatalf("err = %v, want a %d naming %s", err, tc.wantStatus, tc.wantHeader)
			}
		})
	}
}

// A webhook body becomes a CloudEvent whose event id is the webhook's source and the
// delivery id, so that what the trigger starts is named after the delivery.
func TestWebhookEvent(t *testing.T) {
	tr := &schemas.Trigger{Metadata: schemas.ObjectMeta{Name: "on-push", Workspace: "vision"},
		Spec: schemas.TriggerSpec{Webhook: &schemas.TriggerWebhook{Secret: "0123456789abcdef"}}}
	data, msgID, err := triggers.WebhookEvent(tr, "d-7", []byte(`{"ref": "main"}`), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if msgID != "vision/on-push/d-7" {
		t.Errorf("message id %q", msgID)
	}
	if tr.ListenSubject() != "dlc.vision.trigger.on-push" {
		t.Errorf("listens on %q", tr.ListenSubject())
	}
	ev, err := triggers.ParseEvent(tr.ListenSubject(), data)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/opendlc/workspaces/vision/triggers/on-push/webhook d-7"; ev.ID != want {
		t.Errorf("event id %q, want %q", ev.ID, want)
	}
	if ref := ev.Doc["data"].(map[string]any)["ref"]; ref != "main" {
		t.Errorf("data.ref = %v", ref)
	}
	if _, _, err := triggers.WebhookEvent(tr, "d-8", []byte("not json"), time.Unix(0, 0)); err == nil {
		t.Error("a body that is not JSON was accepted")
	}
}
