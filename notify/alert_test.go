package notify_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// alertRule returns a rule of ws that alerts on the jobs labelled team=cv and posts the
// alerts to url.
func alertRule(ws, name, url string, a schemas.NotificationAlert) *schemas.NotificationRule {
	return webhookRule(ws, name, url, func(r *schemas.NotificationRule) {
		r.Spec.Match = schemas.NotificationMatch{Labels: map[string]string{"team": "cv"}}
		r.Spec.Alert = &a
	})
}

// resources publishes a resource sample of one replica of job, as the sampler does,
// with the given GPU utilization at time t.
func (e *env) resources(ws, job, replica string, seq int64, t time.Time, gpuUtil float64) published {
	e.t.Helper()
	uid := ws + "-" + job + "-uid"
	ev, err := events.New(fmt.Sprintf("%s:a0:%s:r%d", uid, replica, seq), events.TypeJobResources, ws,
		events.JobSource(ws, job), job, t,
		events.ResourceData{Job: job, UID: uid, Replica: replica, Seq: seq, CPU: 1, MemoryBytes: 1 << 20,
			GPUs: []events.GPUSample{{Index: 0, Utilization: gpuUtil}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.publish(ws, events.JobResourcesSubject(ws, job), ev)
}

// metricAt publishes a metric event of job with loss at time t.
func (e *env) metricAt(ws, job string, seq int64, t time.Time, loss float64) published {
	e.t.Helper()
	uid := ws + "-" + job + "-uid"
	ev, err := events.New(fmt.Sprintf("%s:a0:worker-0:m%d", uid, seq), events.TypeJobMetric, ws,
		events.JobSource(ws, job), job, t,
		events.MetricData{Job: job, UID: uid, Replica: "worker-0", Seq: seq, Values: map[string]float64{"loss": loss}})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.publish(ws, events.JobMetricsSubject(ws, job), ev)
}

// reportLoss publishes n loss samples of job, numbered from seq, one every period as a
// training loop reports them, and returns the last one's time.
func (e *env) reportLoss(ws, job string, seq int64, n int, period time.Duration) time.Time {
	e.t.Helper()
	var last time.Time
	pace := time.NewTicker(period)
	defer pace.Stop()
	for i := range n {
		last = time.Now()
		e.metricAt(ws, job, seq+int64(i), last, 1)
		<-pace.C
	}
	return last
}

// alerts returns the alert events rc received, in order.
func alerts(t *testing.T, rc *receiver) []events.AlertData {
	t.Helper()
	var out []events.AlertData
	for _, r := range rc.all() {
		var ev events.Event
		var d events.AlertData
		if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != events.TypeAlert {
			t.Errorf("the alert rule delivered something else than an alert: %s", r.body)
			continue
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// states returns "<job>:<state>[:<reason>]" of each alert.
func states(as []events.AlertData) []string {
	var out []string
	for _, a := range as {
		s := a.Job + ":" + a.State
		if a.Reason != "" {
			s += ":" + a.Reason
		}
		out = append(out, s)
	}
	return out
}

var cv = map[string]string{"team": "cv"}

// TestAlertFiresAfterTheWindowAndResolves: a below condition fires once it held for the
// whole window on every replica, not before; a sample that breaks it resolves the
// alert; jobs the match does not select are not watched.
func TestAlertFiresAfterTheWindowAndResolves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	// The job runs before the rule exists: the dispatcher learns it from its status.
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	e.phase("a", "other", 1, schemas.JobRunning, map[string]string{"team": "nlp"})
	d := e.start()
	e.put(d, alertRule("a", "idle", rc.url(), schemas.NotificationAlert{
		Metric: events.ResourceGPUUtilization, Below: new(10.0), For: schemas.Duration(2 * time.Second)}))
	t0 := time.Now().Add(time.Second)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

	e.resources("a", "j", "worker-0", 1, sec(0), 5)
	e.resources("a", "j", "worker-1", 1, sec(0), 3)
	e.resources("a", "j", "worker-0", 2, sec(1), 5)
	e.resources("a", "j", "worker-1", 2, sec(1), 50) // one busy replica: not idle
	e.resources("a", "j", "worker-0", 3, sec(2), 5)
	e.resources("a", "j", "worker-1", 3, sec(2), 4) // idle again from sec(2)
	e.resources("a", "j", "worker-0", 4, sec(3), 5)
	e.resources("a", "other", "worker-0", 1, sec(0), 0)
	e.resources("a", "other", "worker-0", 2, sec(5), 0)
	e.waitProcessed("a")
	testutil.Consistently(t, time.Second, "no alert before the window", func() error {
		if n := len(rc.all()); n != 0 {
			return fmt.Errorf("%d deliveries: %v", n, states(alerts(t, rc)))
		}
		return nil
	})

	e.resources("a", "j", "worker-1", 4, sec(4), 2) // sec(2)..sec(4): 2s idle
	rc.waitDelivered(1)
	e.resources("a", "j", "worker-0", 5, sec(5), 1)
	e.resources("a", "j", "worker-0", 6, sec(6), 80)
	e.resources("a", "j", "worker-1", 5, sec(6), 1)
	rc.waitDelivered(2)
	e.waitProcessed("a")
	got := alerts(t, rc)
	wantEqual(t, "alerts", []string{"j:firing", "j:resolved:Recovered"}, states(got))
	if len(got) == 2 {
		f, r := got[0], got[1]
		if !f.Since.Equal(sec(2).UTC().Truncate(0)) || !r.Since.Equal(f.Since) {
			t.Errorf("since: firing %v, resolved %v; want %v", f.Since, r.Since, sec(2))
		}
		if f.Value == nil || *f.Value != 2 || r.Value == nil || *r.Value != 80 {
			t.Errorf("values: firing %v, resolved %v; want 2 and 80", f.Value, r.Value)
		}
		if f.Threshold == nil || *f.Threshold != 10 || f.Rule != "idle" || f.Metric != "gpu.utilization" ||
			f.Condition != "below 10 for 2s" || f.Labels["team"] != "cv" {
			t.Errorf("firing alert: %+v", f)
		}
	}
	// The webhook got the events as published, on the rule's alert subject.
	for _, r := range rc.all() {
		if !notify.VerifySignature([]byte(testSecret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("bad signature on %s", r.eventID)
		}
	}
}

// TestAlertResolvesWhenTheJobEnds: a firing alert resolves when its job leaves Running,
// and late samples of the ended job raise nothing.
func TestAlertResolvesWhenTheJobEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start()
	e.put(d, alertRule("a", "mem", rc.url(), schemas.NotificationAlert{
		Metric: events.ResourceGPUUtilization, Above: new(90.0), For: schemas.Duration(time.Second)}))
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	t0 := time.Now().Add(time.Second)
	e.resources("a", "j", "worker-0", 1, t0, 95)
	e.resources("a", "j", "worker-0", 2, t0.Add(time.Second), 99)
	rc.waitDelivered(1)
	e.phase("a", "j", 2, schemas.JobSucceeded, cv)
	rc.waitDelivered(2)
	e.resources("a", "j", "worker-0", 3, t0.Add(2*time.Second), 99)
	e.resources("a", "j", "worker-0", 4, t0.Add(4*time.Second), 99)
	e.waitProcessed("a")
	wantEqual(t, "alerts", []string{"j:firing", "j:resolved:JobEnded"}, states(alerts(t, rc)))
}

// TestAlertAbsentMetric: absentFor fires when a running job reports no sample of the
// metric for the window, from its last sample; a new sample resolves it.
func TestAlertAbsentMetric(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start()
	e.put(d, alertRule("a", "silent", rc.url(), schemas.NotificationAlert{
		Metric: "loss", AbsentFor: schemas.Duration(2 * time.Second)}))
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	// The job reports every 500ms, as a training loop does, for 3s: never 2s without.
	last := e.reportLoss("a", "j", 1, 6, 500*time.Millisecond)
	if n := len(rc.all()); n != 0 {
		t.Fatalf("%d alerts while the metric came every 500ms: %v", n, states(alerts(t, rc)))
	}
	rc.waitDelivered(1)
	if fired := time.Now(); fired.Sub(last) < 2*time.Second {
		t.Errorf("absent alert %v after the last sample, before the 2s window", fired.Sub(last))
	}
	e.metricAt("a", "j", 7, time.Now(), 1)
	rc.waitDelivered(2)
	got := alerts(t, rc)
	wantEqual(t, "alerts", []string{"j:firing", "j:resolved:Recovered"}, states(got))
	if len(got) == 2 && !got[0].Since.Equal(last.UTC().Truncate(0)) {
		t.Errorf("since %v, want the last sample's time %v", got[0].Since, last)
	}
	// A job that ends is no longer watched.
	e.phase("a", "j", 2, schemas.JobSucceeded, cv)
	e.waitProcessed("a")
	testutil.Consistently(t, 3*time.Second, "no alert about an ended job", func() error {
		if n := len(rc.all()); n != 2 {
			return fmt.Errorf("%d deliveries: %v", n, states(alerts(t, rc)))
		}
		return nil
	})
}

// TestAlertStateSurvivesRestart: a dispatcher that restarts goes on from the stored
// state: the window that started before the restart fires once, after it; a firing
// alert is not notified again by the next dispatcher, and resolves once.
func TestAlertStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d1 := e.start()
	e.put(d1, alertRule("a", "idle", rc.url(), schemas.NotificationAlert{
		Metric: events.ResourceGPUUtilization, Below: new(10.0), For: schemas.Duration(2 * time.Second)}))
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	t0 := time.Now().Add(time.Second)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	e.resources("a", "j", "worker-0", 1, sec(0), 1)
	e.resources("a", "j", "worker-0", 2, sec(1), 1)
	e.waitProcessed("a")
	closeDispatcher(t, d1)

	e.resources("a", "j", "worker-0", 3, sec(2), 1) // fires: the window started before the restart
	d2 := e.start()
	rc.waitDelivered(1)
	e.waitProcessed("a")
	closeDispatcher(t, d2)

	e.resources("a", "j", "worker-0", 4, sec(3), 1) // still firing: nothing new
	d3 := e.start()
	e.waitProcessed("a")
	e.resources("a", "j", "worker-0", 5, sec(4), 70)
	rc.waitDelivered(2)
	e.waitProcessed("a")
	_ = d3
	got := alerts(t, rc)
	wantEqual(t, "alerts", []string{"j:firing", "j:resolved:Recovered"}, states(got))
	if len(got) > 0 && !got[0].Since.Equal(sec(0).UTC().Truncate(0)) {
		t.Errorf("since %v, want %v: the window from before the restart", got[0].Since, sec(0))
	}
}

// TestAlertStatesOfDeletedRulesAreForgotten: the stored states of a rule deleted while
// no dispatcher ran are deleted by the next one, so a rule created later under that
// name starts afresh and fires again.
func TestAlertStatesOfDeletedRulesAreForgotten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d1 := e.start()
	rule := alertRule("a", "idle", rc.url(), schemas.NotificationAlert{
		Metric: events.ResourceGPUUtilization, Below: new(10.0), For: schemas.Duration(time.Second)})
	e.put(d1, rule)
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	t0 := time.Now().Add(time.Second)
	e.resources("a", "j", "worker-0", 1, t0, 1)
	e.resources("a", "j", "worker-0", 2, t0.Add(time.Second), 1)
	rc.waitDelivered(1)
	e.waitProcessed("a")
	closeDispatcher(t, d1)
	kv, err := e.js.KeyValue(e.ctx, notify.AlertsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(e.ctx, "a.idle.j"); err != nil {
		t.Fatalf("the firing alert's state: %v", err)
	}

	if err := e.store.Delete(e.ctx, "a", "idle"); err != nil {
		t.Fatal(err)
	}
	// Another rule keeps the workspace's consumer.
	e.put(nil, webhookRule("a", "other", rc.url(), func(r *schemas.NotificationRule) { r.Spec.Match.Jobs = []string{"nothing"} }))
	d2 := e.start()
	testutil.Eventually(t, notifyWait, "the deleted rule's state deleted", func() error {
		if _, err := kv.Get(e.ctx, "a.idle.j"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("state: %w", err)
		}
		return nil
	})
	rule.Spec.Alert.For = schemas.Duration(time.Second)
	e.put(d2, rule)
	t1 := time.Now().Add(time.Second)
	e.resources("a", "j", "worker-0", 3, t1, 1)
	e.resources("a", "j", "worker-0", 4, t1.Add(time.Second), 1)
	rc.waitDelivered(2)
	e.waitProcessed("a")
	got := alerts(t, rc)
	wantEqual(t, "alerts", []string{"j:firing", "j:firing"}, states(got))
	if len(got) == 2 && !got[1].Since.Equal(t1.UTC().Truncate(0)) {
		t.Errorf("the new rule's alert since %v, want %v", got[1].Since, t1)
	}
}

// TestAlertAbsentWaitsForTheBacklog: a dispatcher that starts with a backlog of samples
// (published while none ran, read slowly) does not take the metric for absent before it
// has read them: the alert that fires at last starts at the newest sample.
func TestAlertAbsentWaitsForTheBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	// A slow endpoint for the metric events, with one event in flight at a time: the
	// backlog takes about 2s to read.
	slow := newReceiver(t, func(*http.Request, int) int { <-time.After(200 * time.Millisecond); return http.StatusOK })
	d1 := e.start(notify.WithMaxAckPending(1))
	e.put(d1, alertRule("a", "silent", rc.url(), schemas.NotificationAlert{Metric: "loss", AbsentFor: schemas.Duration(time.Second)}))
	e.put(d1, webhookRule("a", "slow", slow.url(), func(r *schemas.NotificationRule) { r.Spec.Match.Types = []string{events.TypeJobMetric} }))
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	e.metricAt("a", "j", 1, time.Now(), 1)
	slow.waitDelivered(1)
	e.waitProcessed("a")
	closeDispatcher(t, d1)

	// While no dispatcher runs, the job reports for 1.5s, every 150ms.
	last := e.reportLoss("a", "j", 2, 10, 150*time.Millisecond)
	e.start(notify.WithMaxAckPending(1))
	rc.waitDelivered(1)
	got := alerts(t, rc)
	if len(got) != 1 || got[0].State != events.AlertFiring || !got[0].Since.Equal(last.UTC().Truncate(0)) {
		t.Errorf("alerts %v, the first since %v; want one firing since the newest sample, %v", states(got), got[0].Since, last)
	}
	// Every metric event was read before (the last one's delivery may be under way).
	if n := len(slow.all()); n < 10 {
		t.Errorf("the slow endpoint got %d metric events before the alert fired, want at least 10 of 11", n)
	}
}

// TestAlertAbsentStoresSamplesAtABoundedRate: a job that reports many times a second
// costs a bounded number of writes to DLC_ALERTS (the last sample's time is stored when
// it moved by a tenth of the window, at most 1s), while the alert still starts at the
// newest sample.
func TestAlertAbsentStoresSamplesAtABoundedRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start()
	e.put(d, alertRule("a", "silent", rc.url(), schemas.NotificationAlert{Metric: "loss", AbsentFor: schemas.Duration(2 * time.Second)}))
	e.phase("a", "j", 1, schemas.JobRunning, cv)
	kv, err := e.js.KeyValue(e.ctx, notify.AlertsBucket)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	e.metricAt("a", "j", 1, t0, 1)
	e.waitProcessed("a")
	first, err := kv.Get(e.ctx, "a.silent.j")
	if err != nil {
		t.Fatalf("the state after the first sample: %v", err)
	}
	// 19 more within 190ms: the state is not written again.
	last := t0
	for i := 1; i < 20; i++ {
		last = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		e.metricAt("a", "j", int64(i+1), last, 1)
	}
	e.waitProcessed("a")
	if now, err := kv.Get(e.ctx, "a.silent.j"); err != nil || now.Revision() != first.Revision() {
		t.Errorf("the state was written again within 200ms of samples: %v", err)
	}
	rc.waitDelivered(1)
	got := alerts(t, rc)
	if len(got) != 1 || !got[0].Since.Equal(last.UTC().Truncate(0)) {
		t.Errorf("alerts %v; want one firing since the newest sample %v", got, last)
	}
}
