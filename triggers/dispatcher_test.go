package triggers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/jstest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workflows"
)

// fakeTemporal records workflow starts and, as Temporal does with OpenDLC's reuse
// policy, refuses an id it has seen. It fails the first failures starts as unavailable.
// The dispatcher's services only start workflows: the client's other methods are left
// unimplemented.
type fakeTemporal struct {
	client.Client
	mu       sync.Mutex
	failures int
	seen     map[string]bool
	starts   []start
	attempts int
}

type start struct {
	id       string
	workflow string
	input    any
	labels   []string
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.failures > 0 {
		f.failures--
		return nil, serviceerror.NewUnavailable("temporal is down")
	}
	if !o.WorkflowExecutionErrorWhenAlreadyStarted {
		return nil, errors.New("the start must fail on a duplicate id")
	}
	if f.seen[o.ID] {
		return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "")
	}
	f.seen[o.ID] = true
	labels, _ := o.TypedSearchAttributes.GetKeywordList(workflows.LabelsKey)
	f.starts = append(f.starts, start{id: o.ID, workflow: wf.(string), input: args[0], labels: labels})
	return fakeRun{id: o.ID}, nil
}

// fakeRun is a started run: its ids are all the service layer reads.
type fakeRun struct {
	client.WorkflowRun
	id string
}

func (r fakeRun) GetID() string    { return r.id }
func (r fakeRun) GetRunID() string { return "run-" + r.id }

func (f *fakeTemporal) snapshot() ([]start, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts), f.attempts
}

type env struct {
	t        *testing.T
	ctx      context.Context
	nc       *nats.Conn
	js       jetstream.JetStream
	store    *triggers.Store
	temporal *fakeTemporal
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	c, url := jstest.Start(t, ctx)
	store, err := triggers.OpenStore(ctx, c.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &env{t: t, ctx: ctx, nc: nc, js: c.JetStream(), store: store, temporal: &fakeTemporal{seen: map[string]bool{}}}
}

func (e *env) startDispatcher() *triggers.Dispatcher {
	e.t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := triggers.StartDispatcher(e.ctx, e.js, service.Compose(e.ctx, service.Config{Temporal: e.temporal, Logger: logger}), triggers.WithLogger(logger))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func (e *env) put(doc string) *schemas.Trigger {
	e.t.Helper()
	tr, err := schemas.DecodeTrigger([]byte(doc))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Put(e.ctx, tr); err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// publish publishes a message without a Nats-Msg-Id (JetStream keeps every copy), as
// programs do, and returns once DLC_INBOUND has stored it: a plain publish and flush
// do not wait for the stream, so drained could otherwise find it empty and return
// before the dispatcher saw anything.
func (e *env) publish(subject, data string) {
	e.t.Helper()
	if _, err := e.js.Publish(e.ctx, subject, []byte(data)); err != nil {
		e.t.Fatal(err)
	}
}

// drained waits until the dispatcher has acknowledged every inbound message stored.
func (e *env) drained() {
	e.t.Helper()
	testutil.Eventually(e.t, time.Minute, "the dispatcher to acknowledge every inbound message stored", func() error {
		s, err := e.js.Stream(e.ctx, triggers.InboundStream)
		if err != nil {
			e.t.Fatal(err)
		}
		c, err := s.Consumer(e.ctx, triggers.DefaultConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(e.ctx)
		if err != nil {
			return err
		}
		if last := s.CachedInfo().State.LastSeq; info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream < last {
			return fmt.Errorf("%d pending, %d unacknowledged, acknowledged up to #%d of #%d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, last)
		}
		return nil
	}, 20*time.Millisecond)
}

// fired reads the trigger's fired events back from DLC_EVENTS.
func (e *env) fired(ws, trigger string) []events.TriggerFiredData {
	e.t.Helper()
	c, err := dlcjs.New(e.nc)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []events.TriggerFiredData
	err = c.ReadUntil(e.ctx, dlcjs.EventsStream, events.TriggerFiredSubject(ws, trigger), nil, func(_ string, data []byte) error {
		var ev events.Event
		var d events.TriggerFiredData
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

const retrainTrigger = `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: retrain, workspace: vision, labels: {team: cv}}
spec:
  subject: dlc.vision.trigger.retrain
  filter: [{field: type, equals: com.example.data.ready}]
  params: {dataKey: "${event.data.key}", currentAccuracy: "${event.data.current}"}
  action:
    pipeline:
      params: [{name: dataKey}, {name: currentAccuracy, default: "0.5"}]
      steps:
        - name: train
          job: {framework: custom, command: [train, "${params.dataKey}"], roles: {worker: {replicas: 1}}}
`

func cloudEvent(id, typ, key string) string {
	return fmt.Sprintf(`{"specversion":"1.0","id":%q,"source":"/etl","type":%q,"data":{"key":%q,"current":0.75}}`, id, typ, key)
}

// An event published twice with the same id starts one pipeline run; another id starts
// another; an event the filter refuses starts nothing. A trigger stored just before
// the events is in effect for them.
func TestDispatcherStartsOncePerEvent(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	e.put(retrainTrigger)
	e.publish("dlc.vision.trigger.retrain", cloudEvent("e1", "com.example.data.ready", "clicks/1"))
	e.publish("dlc.vision.trigger.retrain", cloudEvent("e1", "com.example.data.ready", "clicks/1"))
	e.publish("dlc.vision.trigger.retrain", cloudEvent("e2", "com.example.data.ready", "clicks/2"))
	e.publish("dlc.vision.trigger.retrain", cloudEvent("e3", "com.example.other", "clicks/3"))
	e.publish("dlc.vision.trigger.other", cloudEvent("e4", "com.example.data.ready", "clicks/4"))
	e.publish("dlc.other.trigger.retrain", cloudEvent("e5", "com.example.data.ready", "clicks/5"))
	e.drained()

	starts, attempts := e.temporal.snapshot()
	run1, run2 := schemas.TriggerRunName("retrain", "/etl e1"), schemas.TriggerRunName("retrain", "/etl e2")
	var ids []string
	for _, s := range starts {
		ids = append(ids, s.id)
	}
	if diff := cmp.Diff([]string{workflows.PipelineWorkflowID("vision", run1), workflows.PipelineWorkflowID("vision", run2)}, ids); diff != "" {
		t.Errorf("workflows started (-want +got):\n%s", diff)
	}
	if attempts != 3 {
		t.Errorf("%d start attempts, want 3 (e1 twice, e2 once)", attempts)
	}
	if len(starts) == 0 {
		t.FailNow()
	}
	in, ok := starts[0].input.(workflows.PipelineInput)
	if !ok || starts[0].workflow != workflows.PipelineWorkflowName {
		t.Fatalf("started %s with %T, want the Pipeline workflow", starts[0].workflow, starts[0].input)
	}
	if diff := cmp.Diff(map[string]string{"dataKey": "clicks/1", "currentAccuracy": "0.75"}, in.Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if in.Pipeline.Metadata.Name != run1 || in.Pipeline.Metadata.Workspace != "vision" {
		t.Errorf("pipeline metadata = %+v", in.Pipeline.Metadata)
	}
	if diff := cmp.Diff([]string{"opendlc.io/trigger=retrain", "team=cv"}, starts[0].labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	fired := e.fired("vision", "retrain")
	var names []string
	for _, f := range fired {
		names = append(names, f.StartedName)
	}
	if diff := cmp.Diff([]string{run1, run2}, names); diff != "" {
		t.Errorf("fired events (-want +got):\n%s", diff)
	}
}

const s3Trigger = `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-new-data, workspace: vision}
spec:
  subject: dlc.vision.s3.events
  filter:
    - {field: "data.Records[0].eventName", prefix: "s3:ObjectCreated:"}
    - {field: "data.Records[0].s3.object.key", prefix: clicks/}
  params: {key: "${event.data.Records[0].s3.object.key}"}
  action:
    job:
      framework: custom
      command: [sh, -c, 'echo retraining on "$KEY"']
      env: [{name: KEY, value: "${params.key}"}]
      roles: {worker: {replicas: 1}}
`

// An S3 notification under the trigger's prefix starts a job with the object's key;
// other keys and the gateway's test event start nothing.
func TestDispatcherS3NotificationStartsAJob(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	e.put(s3Trigger)
	e.publish("dlc.vision.s3.events", `{"Service":"S3","Event":"s3:TestEvent"}`)
	e.publish("dlc.vision.s3.events", versityRecord)
	e.publish("dlc.vision.s3.events", `{"Records":[{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":"datasets"},"object":{"key":"views/a.csv","eTag":"x","sequencer":"1B"}}}]}`)
	e.drained()

	starts, _ := e.temporal.snapshot()
	if len(starts) != 1 {
		t.Fatalf("%d workflows started, want 1: %+v", len(starts), starts)
	}
	in, ok := starts[0].input.(workflows.TrainingJobInput)
	if !ok {
		t.Fatalf("started %T, want a TrainingJobInput", starts[0].input)
	}
	run := schemas.TriggerRunName("on-new-data", `s3://datasets/clicks/a.csv etag="0cc175b9" sequencer=1A`)
	if starts[0].id != workflows.JobWorkflowID("vision", run) || in.Job.Metadata.Name != run {
		t.Errorf("started %s (job %s), want job %s", starts[0].id, in.Job.Metadata.Name, run)
	}
	if diff := cmp.Diff([]schemas.EnvVar{{Name: "KEY", Value: "clicks/a.csv"}}, in.Job.Spec.Env); diff != "" {
		t.Errorf("job env (-want +got):\n%s", diff)
	}
	if f := e.fired("vision", "on-new-data"); len(f) != 1 || f[0].Key != "clicks/a.csv" || f[0].StartedKind != "TrainingJob" {
		t.Errorf("fired events = %+v", f)
	}
}

// A start that fails because Temporal is unreachable leaves the event unacknowledged:
// it is delivered again and started then, once.
func TestDispatcherRetriesWhenTemporalIsDown(t *testing.T) {
	e := newEnv(t)
	e.temporal.failures = 2
	e.startDispatcher()
	e.put(retrainTrigger)
	e.publish("dlc.vision.trigger.retrain", cloudEvent("e1", "com.example.data.ready", "clicks/1"))
	testutil.Eventually(t, time.Minute, "the event to be started", func() bool {
		starts, _ := e.temporal.snapshot()
		return len(starts) == 1
	}, 20*time.Millisecond)
	e.drained()
	starts, attempts := e.temporal.snapshot()
	if len(starts) != 1 || attempts != 3 {
		t.Errorf("%d starts after %d attempts, want 1 after 3", len(starts), attempts)
	}
}

// Events published while no dispatcher runs are handled when one starts; a trigger
// deleted no longer fires.
func TestDispatcherDurableAndDelete(t *testing.T) {
	e := newEnv(t)
	d := e.startDispatcher()
	e.put(retrainTrigger)
	if err := d.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.publish("dlc.vision.trigger.retrain", cloudEvent("while-down", "com.example.data.ready", "k"))
	e.startDispatcher()
	e.drained()
	if starts, _ := e.temporal.snapshot(); len(starts) != 1 {
		t.Fatalf("%d starts, want 1 for the event published while no dispatcher ran", len(starts))
	}
	if err := e.store.Delete(e.ctx, "vision", "retrain"); err != nil {
		t.Fatal(err)
	}
	e.publish("dlc.vision.trigger.retrain", cloudEvent("after-delete", "com.example.data.ready", "k"))
	e.drained()
	if starts, _ := e.temporal.snapshot(); len(starts) != 1 {
		t.Errorf("%d starts, want still 1 after the trigger was deleted", len(starts))
	}
}

func TestStore(t *testing.T) {
	e := newEnv(t)
	e.put(retrainTrigger)
	e.put(s3Trigger)
	got, err := e.store.Get(e.ctx, "vision", "retrain")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Subject != "dlc.vision.trigger.retrain" || got.Kind != schemas.KindTrigger {
		t.Errorf("Get = %+v", got)
	}
	list, err := e.store.List(e.ctx, "vision")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range list {
		names = append(names, tr.Metadata.Name)
	}
	if diff := cmp.Diff([]string{"on-new-data", "retrain"}, names); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if l, err := e.store.List(e.ctx, "other"); err != nil || len(l) != 0 {
		t.Errorf("List(other) = %v, %v; want nothing", l, err)
	}
	bad, _ := schemas.DecodeTrigger([]byte(retrainTrigger))
	bad.Spec.Subject = "dlc.other.trigger.x"
	var list2 schemas.ErrorList
	if _, err := e.store.Put(e.ctx, bad); !errors.As(err, &list2) || list2.Fields()[0] != "spec.subject" {
		t.Errorf("Put(invalid) = %v, want an ErrorList on spec.subject", err)
	}
	if err := e.store.Delete(e.ctx, "vision", "retrain"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(e.ctx, "vision", "retrain"); !errors.Is(err, triggers.ErrNotFound) {
		t.Errorf("Get after delete = %v, want ErrNotFound", err)
	}
	if err := e.store.Delete(e.ctx, "vision", "retrain"); !errors.Is(err, triggers.ErrNotFound) {
		t.Errorf("Delete twice = %v, want ErrNotFound", err)
	}
	if _, err := e.store.Get(e.ctx, "Vision", "x"); !errors.Is(err, triggers.ErrInvalidName) {
		t.Errorf("Get(bad workspace) = %v, want ErrInvalidName", err)
	}
}
