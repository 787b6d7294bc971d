package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/triggers"
)

// ownEventTriggerDoc is a trigger of workspace ws on OpenDLC's own events that match
// (YAML of a NotificationMatch): it starts a job printing "<name> <the event's job>".
func ownEventTriggerDoc(ws, name, match string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: %[2]s, workspace: %[1]s}
spec:
  events: {match: %[3]s}
  params: {job: "${event.data.job}"}
  action:
    job:
      framework: custom
      command: [sh, -c, 'echo "%[2]s $JOB"']
      env: [{name: JOB, value: "${params.job}"}]
      roles: {worker: {replicas: 1}}
`, ws, name, match)
}

// shellSpec is a one-replica custom job spec running command, as runJob takes it.
func shellSpec(command string) string {
	return fmt.Sprintf("  framework: custom\n  command: [sh, -c, %q]\n  roles: {worker: {replicas: 1}}\n", command)
}

// succeededEventID is the trigger event id (CloudEvent source and id) of a job's
// Succeeded event.
func succeededEventID(t *testing.T, ctx context.Context, ws, job string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, itest.Left(ctx), "the Succeeded event of job "+ws+"/"+job, func() error {
		evs, data := streamEvents[events.JobPhaseData](t, ctx, env.events, events.JobStatusSubject(ws, job))
		for i, d := range data {
			if d.Phase == string(schemas.JobSucceeded) {
				id = evs[i].Source + " " + evs[i].ID
				return nil
			}
		}
		return fmt.Errorf("%d events, none Succeeded", len(data))
	}, itest.PollInterval)
	return id
}

// ownEventsDrained waits until a dispatcher's consumer of OpenDLC's own events has
// nothing pending and nothing unacknowledged.
func ownEventsDrained(t *testing.T, ctx context.Context, consumer string) {
	t.Helper()
	js := env.events.JetStream()
	testutil.Eventually(t, itest.Left(ctx), "consumer "+consumer+" acknowledges every event", func() error {
		c, err := js.Consumer(ctx, dlcjs.EventsStream, consumer)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return fmt.Errorf("%d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		return nil
	}, 50*time.Millisecond)
}

// triggeredJobs lists the jobs of workspace ws that trigger started.
func triggeredJobs(ctx context.Context, ws, trigger string) ([]string, error) {
	l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=" + trigger}})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, j := range l.Items {
		names = append(names, j.Name)
	}
	return names, nil
}

// A trigger on OpenDLC's own events: a job's Succeeded event in the trigger's
// workspace starts the trigger's job once, with the event's fields as params, though
// every event reaches two dispatchers and one of them restarts in the middle; the same
// event in another workspace starts nothing. A trigger on every job's success fires
// for the jobs of another trigger but never for its own (no loop).
func TestTriggerOnOwnJobEvents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	other := ws[:min(len(ws), 30)] + "-other"

	if _, err := env.api.ApplyTrigger(ctx, []byte(ownEventTriggerDoc(ws, "evaluate",
		"{types: [opendlc.job.phase.v1], phases: [Succeeded], jobs: [train]}"))); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	if _, err := env.api.ApplyTrigger(ctx, []byte(ownEventTriggerDoc(ws, "audit", "{phases: [Succeeded]}"))); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	// Bad input names the field and stores nothing.
	bad := strings.Replace(ownEventTriggerDoc(ws, "bad", "{phases: [Done]}"), "events:", "subject: dlc."+ws+".trigger.x\n  events:", 1)
	if _, err := env.api.ApplyTrigger(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "spec.events.match.phases[0]") {
		t.Errorf("an invalid trigger: %v, want an error naming spec.events.match.phases[0]", err)
	}
	bad = strings.Replace(ownEventTriggerDoc(ws, "bad", "{}"), "events:", "subject: dlc."+ws+".trigger.x\n  events:", 1)
	if _, err := env.api.ApplyTrigger(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "must set only one of subject, events and webhook") {
		t.Errorf("a trigger with two sources: %v", err)
	}
	if n := len(triggersOf(t, ctx, ws)); n != 2 {
		t.Errorf("%d triggers stored, want 2", n)
	}

	// A second dispatcher on consumers of its own: every event reaches both, as it
	// reaches a dispatcher that restarted before acknowledging it.
	const second = "dlc-triggers-own"
	js := env.events.JetStream()
	svc := service.Compose(ctx, service.Config{Temporal: env.temporal, Storage: &storage.Policy{Workspaces: mustRegistry(t, ctx)}})
	start := func() *triggers.Dispatcher {
		d, err := triggers.StartDispatcher(ctx, js, svc, triggers.WithConsumer(second))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "the second dispatcher loads the triggers", func() error {
			if d.AppliedRevision() == 0 {
				return fmt.Errorf("revision %d", d.AppliedRevision())
			}
			return nil
		})
		return d
	}
	d2 := start()
	t.Cleanup(func() {
		_ = d2.Close(context.Background())
		_ = js.DeleteConsumer(context.Background(), triggers.InboundStream, second)
		_ = js.DeleteConsumer(context.Background(), dlcjs.EventsStream, triggers.OwnEventsConsumer(second))
	})

	// The same job in another workspace, with no trigger, succeeds first.
	if j := runJob(t, ctx, other, "train", shellSpec("echo trained")); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s/train: %s", other, j.Status.Phase)
	}
	if j := runJob(t, ctx, ws, "train", shellSpec("echo trained")); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s/train: %s", ws, j.Status.Phase)
	}
	// The second dispatcher restarts: what it had not acknowledged comes again.
	if err := d2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d2 = start()

	trainEvent := succeededEventID(t, ctx, ws, "train")
	evalRun := schemas.TriggerRunName("evaluate", trainEvent)
	if j := waitTerminal(t, ctx, ws, evalRun); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", evalRun, j.Status.Phase)
	}
	if logs := logLines(t, ctx, ws, evalRun); !strings.Contains(logs, "evaluate train\n") {
		t.Errorf("the trigger's job did not get the event's job name:\n%s", logs)
	}
	// Its run record names the trigger and the event it ran for.
	testutil.Eventually(t, time.Minute, "the run record of "+evalRun, func() error {
		page, err := env.api.History(ctx, ws, dlc.HistoryQuery{Name: evalRun})
		if err != nil {
			return err
		}
		if len(page.Records) != 1 {
			return fmt.Errorf("%d records", len(page.Records))
		}
		if o := page.Records[0].Origin; o.Kind != runs.OriginTrigger || o.Name != "evaluate" || o.Event != trainEvent {
			return fmt.Errorf("origin %+v, want trigger evaluate for event %s", o, trainEvent)
		}
		return nil
	})
	// audit fires for train and for evaluate's job, not for its own jobs.
	auditTrain := schemas.TriggerRunName("audit", trainEvent)
	auditEval := schemas.TriggerRunName("audit", succeededEventID(t, ctx, ws, evalRun))
	for _, name := range []string{auditTrain, auditEval} {
		if j := waitTerminal(t, ctx, ws, name); j.Status.Phase != schemas.JobSucceeded {
			t.Fatalf("job %s: %s", name, j.Status.Phase)
		}
		succeededEventID(t, ctx, ws, name)
	}
	ownEventsDrained(t, ctx, triggers.OwnEventsConsumer(triggers.DefaultConsumer))
	ownEventsDrained(t, ctx, triggers.OwnEventsConsumer(second))

	testutil.Consistently(t, 3*time.Second, "one run per event, no loop, nothing in the other workspace", func() error {
		got, err := triggeredJobs(ctx, ws, "evaluate")
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != evalRun {
			return fmt.Errorf("evaluate's jobs %v, want [%s]", got, evalRun)
		}
		if got, err = triggeredJobs(ctx, ws, "audit"); err != nil {
			return err
		}
		if len(got) != 2 {
			return fmt.Errorf("audit's jobs %v, want %s and %s", got, auditTrain, auditEval)
		}
		l, err := env.api.ListJobs(ctx, other, dlc.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d jobs in %s, want its train only", len(l.Items), other)
		}
		return nil
	}, 200*time.Millisecond)
	_, fired := streamEvents[events.TriggerFiredData](t, ctx, env.events, events.TriggerFiredSubject(ws, "evaluate"))
	if len(fired) != 1 || fired[0].StartedName != evalRun || fired[0].Source != events.JobStatusSubject(ws, "train") {
		t.Errorf("evaluate's fired events: %+v", fired)
	}
}

// webhookTriggerDoc is a trigger named name with a webhook whose key is secret: each
// delivery of a branch's ref starts a job printing the ref.
func webhookTriggerDoc(ws, name, secret string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: %s, workspace: %s}
spec:
  webhook: {secret: %q}
  filter: [{field: data.ref, prefix: refs/heads/}]
  params: {ref: "${event.data.ref}"}
  action:
    job:
      framework: custom
      command: [sh, -c, 'echo "deploying $REF"']
      env: [{name: REF, value: "${params.ref}"}]
      roles: {worker: {replicas: 1}}
`, name, ws, secret)
}

// postWebhook sends body to a trigger's webhook, signed with secret at time ts, edits
// the headers, and returns the status and the answer.
func postWebhook(t *testing.T, ctx context.Context, ws, name, secret string, ts time.Time, delivery string, body []byte, edit func(http.Header)) (int, []byte) {
	t.Helper()
	return postWebhookTo(t, ctx, env.e.APIURL, ws, name, secret, ts, delivery, body, edit)
}

// postWebhookTo is postWebhook to the API at apiURL.
func postWebhookTo(t *testing.T, ctx context.Context, apiURL, ws, name, secret string, ts time.Time, delivery string, body []byte, edit func(http.Header)) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/workspaces/%s/triggers/%s/webhook", apiURL, ws, name), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(triggers.HeaderTimestamp, stamp)
	req.Header.Set(triggers.HeaderDelivery, delivery)
	req.Header.Set(triggers.HeaderSignature, triggers.SignWebhook([]byte(secret), stamp, delivery, body))
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// A signed request to a trigger's webhook starts its action once; a replayed delivery,
// a bad signature, an old timestamp, a body that is not JSON, an unknown trigger and a
// trigger without a webhook are refused with a 4xx that names the problem, and start
// nothing. The API does not show the secret.
func TestTriggerWebhookSignedDeliveries(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	const secret = "webhook-secret-of-the-data-platform"
	tr, err := env.api.ApplyTrigger(ctx, []byte(webhookTriggerDoc(ws, "on-push", secret)))
	if err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	if got, err := env.api.GetTrigger(ctx, ws, "on-push"); err != nil || tr.Spec.Webhook.Secret != "********" || got.Spec.Webhook.Secret != "********" {
		t.Errorf("the API shows the webhook secret: %+v / %+v (err %v)", tr.Spec.Webhook, got, err)
	}
	// A trigger without a webhook.
	plain := strings.Replace(webhookTriggerDoc(ws, "plain", secret), fmt.Sprintf("webhook: {secret: %q}", secret), "subject: dlc."+ws+".trigger.plain", 1)
	if _, err := env.api.ApplyTrigger(ctx, []byte(plain)); err != nil {
		t.Fatal(err)
	}

	body := []byte(`{"ref": "refs/heads/main", "after": "abc123"}`)
	now := time.Now()
	status, out := postWebhook(t, ctx, ws, "on-push", secret, now, "delivery-1", body, nil)
	if status != http.StatusAccepted {
		t.Fatalf("a signed delivery: %d %s", status, out)
	}
	var acc api.WebhookAccepted
	if err := json.Unmarshal(out, &acc); err != nil {
		t.Fatal(err)
	}
	run := schemas.TriggerRunName("on-push", triggers.WebhookSource(ws, "on-push")+" delivery-1")
	if acc.Run != run || acc.Delivery != "delivery-1" {
		t.Errorf("answer %+v, want run %s", acc, run)
	}

	refused := []struct {
		name     string
		status   int
		mentions string
		secret   string
		ts       time.Time
		delivery string
		body     []byte
		edit     func(http.Header)
		trigger  string
	}{
		{name: "replayed delivery", status: http.StatusConflict, mentions: "delivery-1 was accepted before"},
		{name: "another key", status: http.StatusUnauthorized, mentions: triggers.HeaderSignature, secret: "not-the-webhook-secret-at-all", delivery: "delivery-2"},
		{name: "body changed", status: http.StatusUnauthorized, mentions: triggers.HeaderSignature, delivery: "delivery-3",
			edit: func(h http.Header) {
				h.Set(triggers.HeaderSignature, triggers.SignWebhook([]byte(secret), h.Get(triggers.HeaderTimestamp), "delivery-3", []byte(`{"ref": "refs/heads/other"}`)))
			}},
		{name: "old timestamp", status: http.StatusUnauthorized, mentions: triggers.HeaderTimestamp, ts: now.Add(-10 * time.Minute), delivery: "delivery-4"},
		{name: "no signature", status: http.StatusUnauthorized, mentions: triggers.HeaderSignature, delivery: "delivery-5",
			edit: func(h http.Header) { h.Del(triggers.HeaderSignature) }},
		{name: "not JSON", status: http.StatusBadRequest, mentions: "JSON", delivery: "delivery-6", body: []byte("ref=main")},
		{name: "no such trigger", status: http.StatusNotFound, mentions: "not found", delivery: "delivery-7", trigger: "nope"},
		{name: "no webhook", status: http.StatusNotFound, mentions: "has no webhook", delivery: "delivery-8", trigger: "plain"},
	}
	for _, c := range refused {
		s, ts, d, b, name := secret, now, "delivery-1", body, "on-push"
		if c.secret != "" {
			s = c.secret
		}
		if !c.ts.IsZero() {
			ts = c.ts
		}
		if c.delivery != "" {
			d = c.delivery
		}
		if c.body != nil {
			b = c.body
		}
		if c.trigger != "" {
			name = c.trigger
		}
		status, out := postWebhook(t, ctx, ws, name, s, ts, d, b, c.edit)
		if status != c.status || !strings.Contains(string(out), c.mentions) {
			t.Errorf("%s: %d %s, want %d mentioning %q", c.name, status, out, c.status, c.mentions)
		}
	}

	if j := waitTerminal(t, ctx, ws, run); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", run, j.Status.Phase)
	}
	if logs := logLines(t, ctx, ws, run); !strings.Contains(logs, "deploying refs/heads/main\n") {
		t.Errorf("the webhook's job did not get the body's ref:\n%s", logs)
	}
	inboundDrained(t, ctx)
	if st, err := env.api.GetTriggerStatus(ctx, ws, "on-push"); err != nil || st.Gate {
		t.Errorf("status of a trigger without controls: %+v, %v; want no gate", st, err)
	}
	if n := countInbound(t, ctx, events.TriggerInboundSubject(ws, "on-push")); n != 1 {
		t.Errorf("%d inbound messages from the webhook, want 1: refused requests publish nothing", n)
	}
	if l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("jobs of %s: %+v, %v; want the one run", ws, l, err)
	}
}

// A trigger on a pipeline run's own phase event: the run's Succeeded event (matched by
// its type, phase and the run's name, and filtered to the events without a step) starts
// the trigger's job once; the events of its steps do not.
func TestTriggerOnOwnPipelineEvent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	// A run's own events carry no data.job: the param takes data.pipeline. The match
	// selects the run's and its steps' events (pipelines: [prepare]); the filter keeps
	// the run's own, which have no data.step.
	doc := strings.Replace(ownEventTriggerDoc(ws, "after-prepare", "{types: [opendlc.pipeline.phase.v1], phases: [Succeeded], pipelines: [prepare]}"),
		"${event.data.job}", "${event.data.pipeline}", 1)
	doc = strings.Replace(doc, "  events: {", "  filter: [{field: data.step, exists: false}]\n  events: {", 1)
	if !strings.Contains(doc, "exists: false") {
		t.Fatalf("the trigger document has no filter:\n%s", doc)
	}
	if _, err := env.api.ApplyTrigger(ctx, []byte(doc)); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	_, err := env.api.RunPipeline(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: prepare, workspace: %s}
spec:
  steps:
    - name: shard
      job: {framework: custom, command: [sh, -c, 'echo shard'], roles: {worker: {replicas: 1}}}
    - name: index
      dependsOn: [shard]
      job: {framework: custom, command: [sh, -c, 'echo index'], roles: {worker: {replicas: 1}}}
`, ws), nil)
	if err != nil {
		t.Fatal(err)
	}
	if run := waitPipeline(t, ctx, ws, "prepare"); run.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline prepare: %s", run.Status.Phase)
	}
	var runEvent string
	testutil.Eventually(t, itest.Left(ctx), "the run's Succeeded event", func() error {
		evs, data := streamEvents[events.PipelinePhaseData](t, ctx, env.events, events.PipelineStatusSubject(ws, "prepare"))
		for i, d := range data {
			if d.Step == "" && d.Phase == "Succeeded" {
				runEvent = evs[i].Source + " " + evs[i].ID
				return nil
			}
		}
		return fmt.Errorf("%d events, no run Succeeded", len(data))
	}, itest.PollInterval)
	started := schemas.TriggerRunName("after-prepare", runEvent)
	if j := waitTerminal(t, ctx, ws, started); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", started, j.Status.Phase)
	}
	if logs := logLines(t, ctx, ws, started); !strings.Contains(logs, "after-prepare prepare\n") {
		t.Errorf("the trigger's job did not get the run's name:\n%s", logs)
	}
	ownEventsDrained(t, ctx, triggers.OwnEventsConsumer(triggers.DefaultConsumer))
	testutil.Consistently(t, 2*time.Second, "one job for the run, none for its steps", func() error {
		got, err := triggeredJobs(ctx, ws, "after-prepare")
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != started {
			return fmt.Errorf("after-prepare's jobs %v, want [%s]", got, started)
		}
		return nil
	}, 200*time.Millisecond)
}

// dlc up's secrets directory (DIR/secrets): a trigger webhook's secretRef and a
// notification rule's webhook secretRef are read from the file WORKSPACE.NAME at each
// request and delivery. Before the file exists the webhook answers 503 and accepts
// nothing; with it, a delivery signed with its key is accepted and one signed with
// another refused; a rotated file takes effect at the next request; the rule's
// deliveries are signed with the file's key.
func TestSecretRefsFromTheSecretsDirectory(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	dir := filepath.Join(env.dir, "stack", "secrets")
	write := func(name, value string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, ws+"."+name), []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc := strings.Replace(webhookTriggerDoc(ws, "platform", "unused-inline-secret"), `webhook: {secret: "unused-inline-secret"}`, "webhook: {secretRef: {name: platform}}", 1)
	if _, err := env.api.ApplyTrigger(ctx, []byte(doc)); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	body := []byte(`{"ref": "refs/heads/main"}`)
	const first, second = "first-platform-key-0123456789", "second-platform-key-0123456789"
	if status, out := postWebhook(t, ctx, ws, "platform", first, time.Now(), "s-1", body, nil); status != http.StatusServiceUnavailable {
		t.Fatalf("before the secret's file exists: %d %s, want 503", status, out)
	}
	write("platform", first)
	for _, c := range []struct {
		key      string
		delivery string
		want     int
	}{{first, "s-1", http.StatusAccepted}, {second, "s-2", http.StatusUnauthorized}} {
		if status, out := postWebhook(t, ctx, ws, "platform", c.key, time.Now(), c.delivery, body, nil); status != c.want {
			t.Fatalf("signed with %q: %d %s, want %d", c.key, status, out, c.want)
		}
	}
	write("platform", second)
	for _, c := range []struct {
		key      string
		delivery string
		want     int
	}{{first, "s-3", http.StatusUnauthorized}, {second, "s-4", http.StatusAccepted}} {
		if status, out := postWebhook(t, ctx, ws, "platform", c.key, time.Now(), c.delivery, body, nil); status != c.want {
			t.Fatalf("after rotation, signed with %q: %d %s, want %d", c.key, status, out, c.want)
		}
	}

	const hookKey = "rule-hook-key-0123456789"
	write("hook", hookKey)
	hook := newHookServer(t, 200, "ok")
	if _, err := env.api.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: signed, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Succeeded]}
  webhook: {url: %q, secretRef: {name: hook}}
`, ws, hook.srv.URL+"/hook")); err != nil {
		t.Fatalf("rule: %v", err)
	}
	submit(t, ctx, itest.JobDoc("signed", ws, `
  framework: custom
  command: [sh, -c, "true"]
  roles: {worker: {replicas: 1}}
`))
	if j := waitTerminal(t, ctx, ws, "signed"); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job: %s %s", j.Status.Phase, j.Status.Message)
	}
	testutil.Eventually(t, itest.Left(ctx), "the rule's delivery signed with the secrets directory's key", func() bool {
		for _, r := range hook.requests() {
			if strings.Contains(string(r.body), `"job":"signed"`) && r.header.Get(notify.HeaderSignature) == notify.Sign([]byte(hookKey), r.body) {
				return true
			}
		}
		return false
	}, 100*time.Millisecond)
}
