package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

const alertSecret = "0123456789abcdef0123456789abcdef"

// receivedAlerts returns the alert events a CloudEvents webhook received, checking each
// one's signature.
func receivedAlerts(t *testing.T, h *hookServer) []events.Event {
	t.Helper()
	var out []events.Event
	for _, r := range h.requests() {
		if !notify.VerifySignature([]byte(alertSecret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("bad signature: %s", r.body)
		}
		var ev events.Event
		if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != events.TypeAlert {
			t.Errorf("the alert rule delivered something else than an alert: %s", r.body)
			continue
		}
		out = append(out, ev)
	}
	return out
}

func alertOf(t *testing.T, ev events.Event) events.AlertData {
	t.Helper()
	var d events.AlertData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// waitAlerts waits until h has received n alerts and returns them.
func waitAlerts(t *testing.T, ctx context.Context, h *hookServer, n int, what string) []events.Event {
	t.Helper()
	testutil.Eventually(t, itest.Left(ctx), what, func() error {
		if got := len(h.requests()); got < n {
			return fmt.Errorf("%d alerts", got)
		}
		return nil
	}, itest.PollInterval)
	return receivedAlerts(t, h)
}

func alertStates(t *testing.T, evs []events.Event) []string {
	var out []string
	for _, ev := range evs {
		d := alertOf(t, ev)
		s := d.Job + ":" + d.State
		if d.Reason != "" {
			s += ":" + d.Reason
		}
		out = append(out, s)
	}
	return out
}

// sampler publishes a replica's resource samples every 200ms with the worker's NATS
// identity, as the resource sampler does, until stopped; gpu sets the GPU utilization of
// the next samples.
type sampler struct {
	gpu  atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func startSampler(t *testing.T, ctx context.Context, ws, job, uid string) *sampler {
	t.Helper()
	nc, err := jetstream.Connect(env.e.Stack.NATS.URL, env.e.Stack.NATS.ClientOptions(devstack.NATSUserWorker)...)
	if err != nil {
		t.Fatal(err)
	}
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer nc.Close()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for seq := int64(1); ; seq++ {
			ev, err := events.New(fmt.Sprintf("%s:a0:worker-0:r%d", uid, seq), events.TypeJobResources, ws,
				events.JobSource(ws, job), job, time.Now(),
				events.ResourceData{Job: job, UID: uid, Replica: "worker-0", Seq: seq, CPU: 0.5, MemoryBytes: 64 << 20,
					MemoryLimitBytes: 1 << 30, GPUs: []events.GPUSample{{Index: 0, Utilization: float64(s.gpu.Load()),
						MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 16 << 30}}})
			if err != nil {
				t.Error(err)
				return
			}
			data, _ := json.Marshal(ev)
			if err := nc.Publish(ctx, events.Msg{Subject: events.JobResourcesSubject(ws, job), ID: ev.ID, Data: data}); err != nil && ctx.Err() == nil {
				t.Errorf("publish a resource sample: %v", err)
				return
			}
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

// lastSampleIs checks that the last resource sample of job in DLC_EVENTS has that GPU
// utilization.
func lastSampleIs(ctx context.Context, ws, job string, gpu float64) error {
	data, err := env.events.LastMsg(ctx, jetstream.EventsStream, events.JobResourcesSubject(ws, job))
	if err != nil {
		return err
	}
	var ev events.Event
	var d events.ResourceData
	if err := json.Unmarshal(data, &ev); err != nil {
		return err
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return err
	}
	if v := d.ResourceMetrics()[events.ResourceGPUUtilization]; v != gpu {
		return fmt.Errorf("last sample's GPU utilization %v", v)
	}
	return nil
}

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// An idle-GPU alert on the real stack: a running job whose replica's samples (published
// to NATS with the worker's identity) stay below 10% for 2s fires one alert at a signed
// CloudEvents webhook and one Slack-format message; when the GPU is used again, both
// resolve; a job the rule does not select raises nothing.
func TestAlertOnResourcesFiresAndClears(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	hook := newHookServer(t, 200, "ok")
	chat := newHookServer(t, 200, "ok")
	for _, r := range []struct{ name, format, url string }{{"idle-gpu", "cloudevents", hook.srv.URL}, {"idle-gpu-chat", "slack", chat.srv.URL}} {
		if _, err := env.api.ApplyRule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: %s, workspace: %s}
spec:
  match: {labels: {team: cv}}
  alert: {metric: gpu.utilization, below: 10, for: 2s}
  webhook: {url: %q, secret: %q, format: %s}
`, r.name, ws, r.url, alertSecret, r.format))); err != nil {
			t.Fatalf("apply rule %s: %v", r.name, err)
		}
	}
	// A window under 1s is refused, naming the field, and nothing is stored.
	_, err := env.api.ApplyRule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: too-short, workspace: %s}
spec:
  alert: {metric: gpu.utilization, below: 10, for: 100ms}
  webhook: {url: %q, secret: %q}
`, ws, hook.srv.URL, alertSecret)))
	if err == nil || !strings.Contains(err.Error(), "spec.alert.for: must be between 1s and 24h0m0s") {
		t.Errorf("a 100ms window: %v", err)
	}
	if _, err := env.api.GetRule(ctx, ws, "too-short"); err == nil {
		t.Error("the refused rule was stored")
	}

	const sleeper = `
  framework: custom
  command: [sh, -c, "sleep 600"]
  roles: {worker: {replicas: 1}}
`
	submit(t, ctx, strings.Replace(itest.JobDoc("train", ws, sleeper), "workspace: "+ws+"}", "workspace: "+ws+", labels: {team: cv}}", 1))
	submit(t, ctx, itest.JobDoc("other", ws, sleeper))
	running := func(j *schemas.JobStatus) bool { return j.Phase == schemas.JobRunning }
	train := waitFor(t, ctx, ws, "train", "Running", func(j *api.Job) bool { return running(&j.Status) })
	other := waitFor(t, ctx, ws, "other", "Running", func(j *api.Job) bool { return running(&j.Status) })

	s := startSampler(t, ctx, ws, "train", train.UID)
	o := startSampler(t, ctx, ws, "other", other.UID) // idle too, but not selected
	// Busy first: the window starts at the first idle sample.
	s.gpu.Store(85)
	testutil.Eventually(t, itest.Left(ctx), "a busy sample published", func() error {
		return lastSampleIs(ctx, ws, "train", 85)
	}, itest.PollInterval)
	s.gpu.Store(3)
	idleFrom := time.Now()
	fired := waitAlerts(t, ctx, hook, 1, "the idle-GPU alert to fire")
	f := alertOf(t, fired[0])
	if f.State != events.AlertFiring || f.Job != "train" || f.Rule != "idle-gpu" || f.Metric != "gpu.utilization" ||
		f.Value == nil || *f.Value != 3 || f.Threshold == nil || *f.Threshold != 10 || f.Labels["team"] != "cv" {
		t.Errorf("firing alert: %+v", f)
	}
	if held := fired[0].Time.Sub(f.Since); held < 2*time.Second {
		t.Errorf("fired %v after the window started, before the 2s window", held)
	}
	if f.Since.Before(idleFrom.Add(-time.Second)) || f.Since.After(idleFrom.Add(time.Second)) {
		t.Errorf("since %v: the first idle sample was published about %v", f.Since, idleFrom)
	}

	s.gpu.Store(60)
	got := waitAlerts(t, ctx, hook, 2, "the idle-GPU alert to resolve")
	r := alertOf(t, got[1])
	if r.State != events.AlertResolved || r.Reason != "Recovered" || r.Value == nil || *r.Value != 60 || !r.Since.Equal(f.Since) {
		t.Errorf("resolved alert: %+v", r)
	}
	s.close()
	o.close()
	testutil.Consistently(t, 2*time.Second, "no more alerts", func() error {
		if got := alertStates(t, receivedAlerts(t, hook)); len(got) != 2 {
			return fmt.Errorf("alerts %v", got)
		}
		return nil
	}, itest.PollInterval)
	if got := alertStates(t, receivedAlerts(t, hook)); strings.Join(got, ",") != "train:firing,train:resolved:Recovered" {
		t.Errorf("alerts: %v", got)
	}

	// The chat rule got the same two alerts as readable Slack messages.
	testutil.Eventually(t, itest.Left(ctx), "two chat messages", func() error {
		if n := len(chat.requests()); n < 2 {
			return fmt.Errorf("%d messages", n)
		}
		return nil
	}, itest.PollInterval)
	for i, want := range []string{"*Alert idle-gpu-chat firing: job train gpu.utilization below 10 for 2s (last 3) since ",
		"*Alert idle-gpu-chat resolved: job train gpu.utilization below 10 for 2s (last 60): resolved*"} {
		var msg struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(chat.requests()[i].body, &msg); err != nil || !strings.HasPrefix(msg.Text, want) ||
			!strings.Contains(msg.Text, "*Job:* train") {
			t.Errorf("chat message %d: %s (%v), want it to start %q", i, chat.requests()[i].body, err, want)
		}
	}
	// The API reads the alerts back from DLC_EVENTS, as dlc event tail --type does: the
	// two rules' firing and resolution.
	var read []string
	if err := env.api.Events(ctx, ws, dlc.EventOptions{Type: events.TypeAlert}, func(ev events.Event) error {
		d := alertOf(t, ev)
		read = append(read, d.Rule+":"+d.State)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(read)
	if got := strings.Join(read, ","); got != "idle-gpu-chat:firing,idle-gpu-chat:resolved,idle-gpu:firing,idle-gpu:resolved" {
		t.Errorf("alert events read through the API: %s", got)
	}
	for _, j := range []string{"train", "other"} {
		if _, err := env.api.StopJob(ctx, ws, j, "test over"); err != nil {
			t.Errorf("stop %s: %v", j, err)
		}
	}
}

// A training job that prints dlc:metric lines, goes silent for longer than absentFor,
// then prints again fires an absent-metric alert and resolves it, on the real stack.
func TestAlertOnAbsentMetric(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	hook := newHookServer(t, 200, "ok")
	if _, err := env.api.ApplyRule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: silent, workspace: %s}
spec:
  alert: {metric: loss, absentFor: 2s}
  webhook: {url: %q, secret: %q}
`, ws, hook.srv.URL, alertSecret))); err != nil {
		t.Fatalf("apply rule: %v", err)
	}
	// The same alert by e-mail, to a real SMTP server on loopback.
	sink := newMailSink(t)
	if _, err := env.api.ApplyRule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: silent-mail, workspace: %s}
spec:
  alert: {metric: loss, absentFor: 2s}
  email:
    to: [oncall@example.com]
    from: dlc@example.com
    smtp: {host: 127.0.0.1, port: %d, tls: none}
`, ws, sink.port))); err != nil {
		t.Fatalf("apply e-mail rule: %v", err)
	}
	resume := filepath.Join(t.TempDir(), "resume")
	// Reports its loss every 200ms for 2s, waits (silent) until the test creates the
	// resume file, then reports again until stopped.
	script := fmt.Sprintf(`i=0; while [ $i -lt 10 ]; do echo "dlc:metric loss=0.$i"; i=$((i+1)); sleep 0.2; done
echo "waiting"; while [ ! -f %s ]; do sleep 0.1; done
while :; do echo "dlc:metric loss=0.05"; sleep 0.2; done`, resume)
	submit(t, ctx, itest.ShellJob(ws, "silent-job", script))
	waitFor(t, ctx, ws, "silent-job", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	fired := waitAlerts(t, ctx, hook, 1, "the absent-metric alert to fire")
	f := alertOf(t, fired[0])
	if f.State != events.AlertFiring || f.Job != "silent-job" || f.Metric != "loss" || f.Condition != "absent for 2s" || f.Value != nil {
		t.Errorf("firing alert: %+v", f)
	}
	if gap := fired[0].Time.Sub(f.Since); gap < 2*time.Second {
		t.Errorf("fired %v after the last sample, before the 2s window", gap)
	}
	// since is the time of the last loss line before the silence.
	logs := jobLogs(t, ctx, ws, "silent-job")
	var lastLoss time.Time
	for _, l := range logs {
		if l.Line == "waiting" {
			break
		}
		if strings.HasPrefix(l.Line, "dlc:metric") {
			lastLoss = l.Time
		}
	}
	if !f.Since.Equal(lastLoss) {
		t.Errorf("since %v, want the last loss line's time %v", f.Since, lastLoss)
	}
	if err := os.WriteFile(resume, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := waitAlerts(t, ctx, hook, 2, "the absent-metric alert to resolve")
	if states := alertStates(t, got); strings.Join(states, ",") != "silent-job:firing,silent-job:resolved:Recovered" {
		t.Errorf("alerts: %v", states)
	}
	if r := alertOf(t, got[1]); !r.Since.Equal(f.Since) || r.Value == nil || *r.Value != 0.05 {
		t.Errorf("resolved alert: %+v", r)
	}
	// Two e-mails: the firing and the resolution, each titled with the rule, job and
	// state, the body one fact a line.
	testutil.Eventually(t, itest.Left(ctx), "two e-mails", func() error {
		if n := len(sink.messages()); n < 2 {
			return fmt.Errorf("%d e-mails", n)
		}
		return nil
	}, itest.PollInterval)
	for i, want := range []string{"[OpenDLC] Alert silent-mail firing: job silent-job loss absent for 2s since ",
		"[OpenDLC] Alert silent-mail resolved: job silent-job loss absent for 2s (last 0.05): resolved"} {
		msg, err := mail.ReadMessage(strings.NewReader(string(sink.messages()[i])))
		if err != nil {
			t.Fatal(err)
		}
		subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if !strings.HasPrefix(subject, want) || !strings.Contains(string(body), "rule: silent-mail\r\n") ||
			!strings.Contains(string(body), "job: silent-job\r\n") {
			t.Errorf("e-mail %d: subject %q, body %q; want the subject to start %q", i, subject, body, want)
		}
	}
	if _, err := env.api.StopJob(ctx, ws, "silent-job", "test over"); err != nil {
		t.Errorf("stop: %v", err)
	}
	waitTerminal(t, ctx, ws, "silent-job")
	testutil.Consistently(t, 3*time.Second, "no alert about the stopped job", func() error {
		if n := len(hook.requests()); n != 2 {
			return fmt.Errorf("%d alerts: %v", n, alertStates(t, receivedAlerts(t, hook)))
		}
		if n := len(sink.messages()); n != 2 {
			return fmt.Errorf("%d e-mails", n)
		}
		return nil
	}, itest.PollInterval)
}
