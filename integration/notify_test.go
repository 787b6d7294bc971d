package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
)

// A notification rule created through the API delivers a job's terminal phase to a
// webhook, signed, once the job ends; the rule reads back with its secret redacted.
func TestNotificationRuleDeliversSignedWebhook(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	const secret = "0123456789abcdef0123456789abcdef"
	var mu sync.Mutex
	var got []string
	var badSig int
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !notify.VerifySignature([]byte(secret), body, r.Header.Get(notify.HeaderSignature)) {
			badSig++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev events.Event
		var d events.JobPhaseData
		if json.Unmarshal(body, &ev) == nil && json.Unmarshal(ev.Data, &d) == nil {
			got = append(got, d.Job+":"+d.Phase)
		}
	}))
	defer receiver.Close()

	rule, err := env.api.ApplyRule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: terminal, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Succeeded, Failed]}
  webhook: {url: %q, secret: %q}
`, ws, receiver.URL, secret)))
	if err != nil {
		t.Fatalf("apply rule: %v", err)
	}
	if rule.Spec.Webhook.Secret == secret {
		t.Error("the API returned the webhook secret")
	}
	if l, err := env.api.ListRules(ctx, ws); err != nil || len(l.Items) != 1 {
		t.Errorf("list rules: %+v %v", l, err)
	}

	for _, job := range []struct{ name, cmd string }{{"ok", "true"}, {"bad", "exit 7"}} {
		submit(t, ctx, itest.ShellJob(ws, job.name, job.cmd))
		waitTerminal(t, ctx, ws, job.name)
	}
	want := []string{"bad:Failed", "ok:Succeeded"}
	var cur []string
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("the webhook to get %v", want), func() error {
		mu.Lock()
		cur = append([]string(nil), got...)
		mu.Unlock()
		if len(cur) < 2 {
			return fmt.Errorf("got %v", cur)
		}
		return nil
	}, itest.PollInterval)
	sortStrings(cur)
	if diff := cmp.Diff(want, cur); diff != "" {
		t.Errorf("webhook deliveries (-want +got):\n%s", diff)
	}
	if badSig != 0 {
		t.Errorf("%d deliveries with a bad signature", badSig)
	}
	if err := env.api.DeleteRule(ctx, ws, "terminal"); err != nil {
		t.Errorf("delete rule: %v", err)
	}
}

func sortStrings(s []string) { slices.Sort(s) }
