package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/triggers"
)

// oneTrigger is a trigger store that holds one trigger.
type oneTrigger struct{ t *schemas.Trigger }

func (s oneTrigger) Put(context.Context, *schemas.Trigger) (uint64, error) { return 1, nil }
func (s oneTrigger) Get(_ context.Context, ws, name string) (*schemas.Trigger, error) {
	if ws != s.t.Metadata.Workspace || name != s.t.Metadata.Name {
		return nil, errNoTrigger
	}
	return s.t, nil
}
func (s oneTrigger) List(context.Context, string) ([]*schemas.Trigger, error) {
	return []*schemas.Trigger{s.t}, nil
}
func (s oneTrigger) Delete(context.Context, string, string) error { return nil }
func (s oneTrigger) Sentinels() (notFound, invalidName error)     { return errNoTrigger, errNoTrigger }

func webhookTrigger(wh schemas.TriggerWebhook) *schemas.Trigger {
	return &schemas.Trigger{APIVersion: schemas.APIVersion, Kind: schemas.KindTrigger,
		Metadata: schemas.ObjectMeta{Name: "hook", Workspace: "ml"},
		Spec:     schemas.TriggerSpec{Webhook: &wh, Action: schemas.TriggerAction{Job: &schemas.TrainingJobSpec{}}}}
}

func signedRequest(secret string, body []byte) *http.Request {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req := httptest.NewRequest(http.MethodPost, "/v1/workspaces/ml/triggers/hook/webhook", bytes.NewReader(body))
	req.Header.Set(triggers.HeaderTimestamp, ts)
	req.Header.Set(triggers.HeaderDelivery, "d-1")
	req.Header.Set(triggers.HeaderSignature, triggers.SignWebhook([]byte(secret), ts, "d-1", body))
	return req
}

// A webhook whose trigger names a secretRef is verified with the secret the server's
// source resolves; without a source it answers 503. A body over 256 KiB is refused.
// (That a verified delivery is stored and starts its run once is shown on the real
// stack: integration's TestTriggerWebhookSignedDeliveries.)
func TestWebhookSecretRef(t *testing.T) {
	tr := webhookTrigger(schemas.TriggerWebhook{SecretRef: &schemas.SecretRef{Name: "platform"}})
	sc := service.Config{Triggers: oneTrigger{tr}}
	body := []byte(`{"ref": "main"}`)
	serve := func(s *Server, req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec
	}

	noSource := testServerWith(nil, fakeAuth{}, sc)
	if rec := serve(noSource, signedRequest("0123456789abcdef-platform", body)); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "spec.webhook.secretRef") {
		t.Errorf("without a secret source: %d %s", rec.Code, rec.Body)
	}

	withSource := testServerWith(nil, fakeAuth{}, sc, WithWebhookSecrets(notify.StaticSecrets{"ml/platform": []byte("0123456789abcdef-platform")}))
	if rec := serve(withSource, signedRequest("another-key-of-16-chars", body)); rec.Code != http.StatusUnauthorized ||
		!strings.Contains(rec.Body.String(), triggers.HeaderSignature) {
		t.Errorf("signed with another key: %d %s", rec.Code, rec.Body)
	}
	// Signed with the resolved key, the request passes verification and reaches the
	// publish, which this server (no JetStream) cannot do.
	if rec := serve(withSource, signedRequest("0123456789abcdef-platform", body)); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "no JetStream connection") {
		t.Errorf("signed with the resolved key: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(withSource, signedRequest("0123456789abcdef-platform", bytes.Repeat([]byte(" "), maxWebhookBody+1))); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d %s", rec.Code, rec.Body)
	}
}

// The API's answers redact a webhook's inline secret.
func TestTriggerAnswersRedactTheWebhookSecret(t *testing.T) {
	tr := webhookTrigger(schemas.TriggerWebhook{Secret: "0123456789abcdef-inline"})
	authn := fakeAuth{}
	token := authn.token(t, "root", api.AllWorkspaces, api.RoleAdmin)
	s := testServerWith(nil, authn, service.Config{Triggers: oneTrigger{tr}})
	for _, path := range []string{"/v1/workspaces/ml/triggers/hook", "/v1/workspaces/ml/triggers"} {
		rec := call(s.Handler(), http.MethodGet, path, token, nil)
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "inline") || !strings.Contains(rec.Body.String(), redacted) {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	if tr.Spec.Webhook.Secret != "0123456789abcdef-inline" {
		t.Errorf("the stored trigger was changed: %q", tr.Spec.Webhook.Secret)
	}
}
