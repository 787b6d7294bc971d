package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// Options configure a Dispatcher.
type Options struct {
	// Consumer is the name of the durable consumer on DLC_INBOUND.
	Consumer string
	// AckWait is how long JetStream waits for an acknowledgement before it delivers an
	// event again.
	AckWait time.Duration
	// StartTimeout bounds one workflow start.
	StartTimeout time.Duration
	// Logger receives what goes wrong.
	Logger *slog.Logger
}

// Option changes Options.
type Option func(*Options) error

// WithConsumer sets the durable consumer's name. Default DefaultConsumer. Two
// dispatchers may share one consumer: each event goes to one of them.
func WithConsumer(name string) Option {
	return func(o *Options) error {
		if !dnsLabelRE.MatchString(name) {
			return fmt.Errorf("triggers: consumer name %q: lowercase letters, digits and '-' only", name)
		}
		o.Consumer = name
		return nil
	}
}

// WithAckWait sets the consumers' ack wait, at least 1s. Default DefaultAckWait.
func WithAckWait(d time.Duration) Option {
	return dlcjs.AckWaitOption("triggers", d, func(o *Options, d time.Duration) { o.AckWait = d })
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *Options) error { o.Logger = l; return nil }
}

// DefaultAckWait is the consumers' default ack wait. It bounds how late an event held
// by a dispatcher that crashed reaches another one: short, so that the event still
// falls within the debounce window it was sent in (a window is at least a second, and
// usually a minute). An event whose handling takes longer is kept from redelivery by
// "in progress" acknowledgements (handleWhileAlive).
const DefaultAckWait = 5 * time.Second

// pullBatch bounds the events a dispatcher holds unhandled: each waits for the ones
// before it, and is delivered again after the ack wait if its dispatcher crashes.
const pullBatch = 16

// Dispatcher reads DLC_INBOUND and starts the action of every trigger an event matches.
// Start one with StartDispatcher; Close stops it.
type Dispatcher struct {
	js jetstream.JetStream
	// jobs and pipelines start the actions: the service layer, which owns how a job
	// and a pipeline run start (the same starts as the API's).
	jobs        *service.Jobs
	pipelines   *service.Pipelines
	experiments *service.Experiments
	o           Options
	log         *slog.Logger
	kv          jetstream.KeyValue
	// tc and taskQueue signal the gates of triggers with controls; gateWorker serves
	// the gates' activities (gate.go).
	tc         client.Client
	taskQueue  string
	gateMu     sync.Mutex
	gateWorker worker.Worker
	closed     bool // under gateMu: no gate worker starts any more
	// templates runs the stored pipeline templates triggers name; nil: none is served.
	templates *service.PipelineTemplates

	mu        sync.RWMutex
	bySubject map[string]map[string]*schemas.Trigger // subject -> key -> trigger
	subjectOf map[string]string                      // key -> subject
	applied   atomic.Uint64                          // newest bucket revision applied

	stopWatch context.CancelFunc
	watchDone chan struct{}
	consume   jetstream.ConsumeContext
	// consumeOwn reads OpenDLC's own status events for triggers with an events source
	// (own.go).
	consumeOwn jetstream.ConsumeContext
	ctx        context.Context
	cancel     context.CancelFunc
	closeOnce  sync.Once
}

// StartDispatcher loads every trigger, then consumes DLC_INBOUND through the durable
// consumer until Close; it starts actions through svc, the process's services (so
// with the same task queue, namespace and storage policy as its API: what names an
// S3 location outside its workspace's is not started, the trigger is not fired for
// that event, and the refusal is logged). The streams and buckets
// events/jetstream.EnsureStreams declares must exist.
func StartDispatcher(ctx context.Context, js jetstream.JetStream, svc *service.Service, opts ...Option) (*Dispatcher, error) {
	o := Options{
		Consumer:     DefaultConsumer,
		AckWait:      DefaultAckWait,
		StartTimeout: 10 * time.Second,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	d := &Dispatcher{
		js: js, o: o, log: o.Logger,
		jobs: svc.Jobs, pipelines: svc.Pipelines, experiments: svc.Experiments,
		bySubject: map[string]map[string]*schemas.Trigger{},
		subjectOf: map[string]string{},
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With("component", "triggers")
	d.tc, d.taskQueue = svc.Temporal()
	d.templates = svc.Templates
	var err error
	if d.kv, err = js.KeyValue(ctx, TriggersBucket); err != nil {
		return nil, fmt.Errorf("triggers: open bucket %s (created by jetstream.EnsureStreams): %w", TriggersBucket, err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watcher, err := d.kv.WatchAll(watchCtx)
	if err != nil {
		stopWatch()
		return nil, fmt.Errorf("triggers: watch %s: %w", TriggersBucket, err)
	}
	if _, err := dlcjs.LoadWatched(ctx, watcher, TriggersBucket, d.apply); err != nil {
		_ = watcher.Stop()
		stopWatch()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("triggers: %w", err)
	}
	d.stopWatch, d.watchDone = stopWatch, make(chan struct{})
	go d.watch(watchCtx, watcher)

	d.ctx, d.cancel = context.WithCancel(context.Background())
	cons, err := js.CreateOrUpdateConsumer(ctx, InboundStream, jetstream.ConsumerConfig{
		Durable:       o.Consumer,
		Description:   "OpenDLC trigger dispatcher",
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 256,
	})
	if err == nil {
		d.consume, err = cons.Consume(d.handle, jetstream.PullMaxMessages(pullBatch))
	}
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("triggers: consume %s: %w", InboundStream, err)
	}
	if err := d.startOwnEvents(ctx); err != nil {
		d.consume.Stop()
		d.stop()
		return nil, err
	}
	return d, nil
}

// Close stops reading events and waits, until ctx ends, for the event being handled.
// Events not acknowledged are delivered again to the next dispatcher.
func (d *Dispatcher) Close(ctx context.Context) error {
	var err error
	d.closeOnce.Do(func() {
		for _, c := range []jetstream.ConsumeContext{d.consume, d.consumeOwn} {
			if c == nil {
				continue
			}
			c.Stop()
			select {
			case <-c.Closed():
			case <-ctx.Done():
				err = fmt.Errorf("triggers: close: %w", ctx.Err())
			}
		}
		d.stop()
	})
	return err
}

func (d *Dispatcher) stop() {
	d.gateMu.Lock()
	if d.gateWorker != nil {
		d.gateWorker.Stop()
	}
	d.gateWorker, d.closed = nil, true
	d.gateMu.Unlock()
	if d.cancel != nil {
		d.cancel()
	}
	d.stopWatch()
	<-d.watchDone
}

// AppliedRevision is the DLC_TRIGGERS revision of the newest trigger change in effect.
func (d *Dispatcher) AppliedRevision() uint64 { return d.applied.Load() }

// apply records one bucket entry: a stored trigger, or a deletion.
func (d *Dispatcher) apply(e jetstream.KeyValueEntry) {
	defer func() { d.applied.Store(max(d.applied.Load(), e.Revision())) }()
	key := e.Key()
	var t *schemas.Trigger
	if e.Operation() == jetstream.KeyValuePut {
		var err error
		if t, err = decodeTrigger(e.Value()); err != nil {
			d.log.Error("ignoring a stored trigger", "key", key, "error", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.subjectOf[key]; ok {
		delete(d.bySubject[old], key)
		if len(d.bySubject[old]) == 0 {
			delete(d.bySubject, old)
		}
		delete(d.subjectOf, key)
	}
	if t == nil || Key(t.Metadata.Workspace, t.Metadata.Name) != key {
		return
	}
	if t.Spec.HasControls() {
		// Serve the gates' activities from the first trigger with controls on.
		go d.startGateWorker()
	}
	s := t.ListenSubject()
	if t.Spec.Events != nil {
		s = ownEventsKey(t.Metadata.Workspace)
	}
	if d.bySubject[s] == nil {
		d.bySubject[s] = map[string]*schemas.Trigger{}
	}
	d.bySubject[s][key] = t
	d.subjectOf[key] = s
}

// watch applies trigger changes as they are stored.
func (d *Dispatcher) watch(ctx context.Context, watcher jetstream.KeyWatcher) {
	defer close(d.watchDone)
	defer func() {
		// nil when the dispatcher was closed while it could not watch again.
		if watcher != nil {
			_ = watcher.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-watcher.Updates():
			if !ok {
				if ctx.Err() != nil {
					return
				}
				// The watcher ended (its connection closed); start another, which reads
				// every current trigger again.
				_ = watcher.Stop()
				if watcher = dlcjs.Rewatch(ctx, d.kv, d.log, "triggers"); watcher == nil {
					return
				}
				continue
			}
			if e != nil {
				d.apply(e)
			}
		}
	}
}

// catchUp waits, briefly, until every trigger change stored so far is in effect, so that
// an event published after a trigger was stored is matched against it.
func (d *Dispatcher) catchUp(ctx context.Context) {
	st, err := d.kv.Status(ctx)
	if err != nil {
		return
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return
	}
	last := bs.StreamInfo().State.LastSeq
	deadline := time.Now().Add(2 * time.Second)
	for d.applied.Load() < last && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// matching returns the triggers listening on subject, sorted by key.
func (d *Dispatcher) matching(subject string) []*schemas.Trigger {
	d.mu.RLock()
	defer d.mu.RUnlock()
	m := d.bySubject[subject]
	out := make([]*schemas.Trigger, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// handle processes one inbound message: every matching trigger's action is started,
// then the message is acknowledged; a transient failure has it delivered again.
func (d *Dispatcher) handle(msg jetstream.Msg) {
	ev, err := ParseEvent(msg.Subject(), msg.Data())
	if err != nil {
		d.log.Debug("ignoring an inbound message", "subject", msg.Subject(), "error", err)
		_ = msg.Ack()
		return
	}
	d.catchUp(d.ctx)
	d.dispatch(msg, ev, d.matching(ev.Subject), func(t *schemas.Trigger) bool {
		return t.Metadata.Workspace == ev.Workspace && t.Spec.Matches(ev.Doc)
	})
}

// inProgress tells JetStream, every third of the ack wait until the returned stop is
// called, that msg is being handled, so that a slow start (a catch-up, a Temporal
// call under load) does not have the event delivered to another dispatcher meanwhile.
func (d *Dispatcher) inProgress(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d.o.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					d.log.Debug("extending an event's ack wait", "subject", msg.Subject(), "error", err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// dispatch fires every trigger of ts that selects accepts for the event, then
// acknowledges the message; a transient failure has it delivered again after a backoff.
func (d *Dispatcher) dispatch(msg jetstream.Msg, ev Event, ts []*schemas.Trigger, selects func(*schemas.Trigger) bool) {
	stop := d.inProgress(msg)
	defer stop()
	retry := false
	for _, t := range ts {
		if !selects(t) {
			continue
		}
		if err := d.fire(t, ev); err != nil {
			if _, ok := errors.AsType[*permanentError](err); ok {
				d.log.Warn("trigger not fired", "workspace", t.Metadata.Workspace, "trigger", t.Metadata.Name,
					"event", ev.ID, "error", err)
				continue
			}
			d.log.Error("trigger action not started; the event will be delivered again", "workspace", t.Metadata.Workspace,
				"trigger", t.Metadata.Name, "event", ev.ID, "error", err)
			retry = true
		}
	}
	if !retry {
		if err := msg.Ack(); err != nil {
			d.log.Warn("acknowledging an inbound event", "subject", ev.Subject, "error", err)
		}
		return
	}
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = md.NumDelivered
	}
	_ = msg.NakWithDelay(min(time.Second<<min(n-1, 6), time.Minute))
}

// permanentError is a failure retrying will not cure: the trigger cannot produce a
// valid action for this event.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(format string, args ...any) error {
	return &permanentError{fmt.Errorf(format, args...)}
}

// fire starts a trigger's action for an event, or, for a trigger with controls, hands
// the event to the trigger's gate (gate.go). An action already started for this event
// counts as started.
func (d *Dispatcher) fire(t *schemas.Trigger, ev Event) error {
	params, err := t.Spec.ResolveParams(ev.Doc)
	if err != nil {
		return permanent("%w", err)
	}
	if t.Spec.HasControls() {
		return d.signalGate(t, ev, params)
	}
	_, err = d.startRun(d.ctx, t, schemas.TriggerRunName(t.Metadata.Name, ev.ID), params, ev.ID, ev.Subject, ev.Key)
	return err
}

// startRun starts a trigger's action, named runName, with params, for the event
// eventID (from source, about key); it answers the kind it started. A run already
// started counts as started.
func (d *Dispatcher) startRun(parent context.Context, t *schemas.Trigger, runName string, params map[string]string, eventID, source, key string) (schemas.Kind, error) {
	ws := t.Metadata.Workspace
	labels := make(map[string]string, len(t.Metadata.Labels)+1)
	maps.Copy(labels, t.Metadata.Labels)
	labels[schemas.LabelTrigger] = t.Metadata.Name

	// start starts the action through the service layer, which owns its workflow id,
	// options and search attributes, as it does for the API.
	var kind schemas.Kind
	var start func(ctx context.Context) error
	switch a := t.Spec.Action; {
	case a.PipelineTemplateRef != nil:
		if d.templates == nil {
			return "", permanent("this process serves no pipeline templates")
		}
		kind = schemas.KindPipeline
		start = func(ctx context.Context) error {
			// The template is resolved now; a template not found is no less missing when
			// the event is delivered again.
			_, err := d.templates.RunLabelled(ctx, ws, a.PipelineTemplateRef.Name, runName, labels, params)
			if errors.Is(err, service.ErrNotFound) {
				return permanent("%w", err)
			}
			return err
		}
	case a.Pipeline != nil:
		p := schemas.Pipeline{
			APIVersion: schemas.APIVersion,
			Kind:       schemas.KindPipeline,
			Metadata:   schemas.ObjectMeta{Name: runName, Workspace: ws, Labels: labels, Annotations: eventAnnotation(eventID)},
			Spec:       *a.Pipeline,
		}
		if errs := p.Validate(); len(errs) > 0 {
			return "", permanent("the pipeline is invalid: %v", errs)
		}
		values, errs := p.Spec.ResolveParams(pipelineParams(a.Pipeline, params))
		if len(errs) > 0 {
			return "", permanent("the pipeline's parameters: %v", errs)
		}
		kind = schemas.KindPipeline
		start = func(ctx context.Context) error {
			_, err := d.pipelines.Start(ctx, &p, values)
			return err
		}
	case a.Experiment != nil:
		exp, err := experimentAction(t, runName, labels, params)
		if err != nil {
			return "", err
		}
		exp.Metadata.Annotations = eventAnnotation(eventID)
		kind = schemas.KindExperiment
		start = func(ctx context.Context) error {
			_, err := d.experiments.Start(ctx, exp)
			return err
		}
	case a.Job != nil:
		spec := schemas.CopyJobSpec(a.Job)
		// Values taken from the event go into arguments and environment values, never
		// through a shell's parser (schemas.SubstituteJob).
		errs := schemas.SubstituteJob(&spec, schemas.NewPath("spec"), func(r schemas.TemplateRef) (string, error) {
			if x, ok := params[r.Name]; ok && r.Root == schemas.RefParams {
				return x, nil
			}
			return "", fmt.Errorf("%s: no value", r)
		})
		if len(errs) > 0 {
			return "", permanent("%w", errors.Join(errs...))
		}
		job := schemas.TrainingJob{
			APIVersion: schemas.APIVersion,
			Kind:       schemas.KindTrainingJob,
			Metadata:   schemas.ObjectMeta{Name: runName, Workspace: ws, Labels: labels, Annotations: eventAnnotation(eventID)},
			Spec:       spec,
		}
		job.Default()
		if errs := job.Validate(); len(errs) > 0 {
			return "", permanent("the job is invalid: %v", errs)
		}
		kind = schemas.KindTrainingJob
		start = func(ctx context.Context) error {
			_, err := d.jobs.Start(ctx, &job)
			return err
		}
	default:
		return "", permanent("the trigger has no action")
	}

	// The run is listed under the trigger's owner, who applied it (DlcOwner).
	ctx, cancel := context.WithTimeout(service.WithOwner(parent, t.Metadata.Annotations[schemas.AnnotationOwner]), d.o.StartTimeout)
	defer cancel()
	switch err := start(ctx); {
	case isInvalid(err):
		// The workspace's storage locations refuse the document: no retry cures it.
		return "", permanent("%s %s refused: %w", kind, runName, err)
	case errors.Is(err, service.ErrAlreadyExists):
		d.log.Debug("trigger action already started for this event", "workspace", ws, "trigger", t.Metadata.Name, "run", runName)
	case err != nil:
		return "", fmt.Errorf("start %s %s: %w", kind, runName, err)
	default:
		d.log.Info("trigger fired", "workspace", ws, "trigger", t.Metadata.Name, "event", eventID, "started", runName)
	}
	d.publishFired(ctx, t, source, key, kind, runName)
	return kind, nil
}

// pipelineParams are the params a trigger's pipeline run gets: the implicit params of a
// debounced run (eventCount, events) only where the pipeline declares them.
func pipelineParams(p *schemas.PipelineSpec, params map[string]string) map[string]string {
	out := maps.Clone(params)
	for _, k := range []string{schemas.ParamEvents, schemas.ParamEventCount} {
		if _, ok := out[k]; ok && !slices.ContainsFunc(p.Params, func(pp schemas.PipelineParam) bool { return pp.Name == k }) {
			delete(out, k)
		}
	}
	return out
}

// publishFired publishes the trigger's opendlc.trigger.fired.v1 event. Its message id is
// the run's, so a repeat within DLC_EVENTS' duplicate window is dropped. A failure is
// only logged: the action has started, which is what counts.
func (d *Dispatcher) publishFired(ctx context.Context, t *schemas.Trigger, source, key string, kind schemas.Kind, runName string) {
	ws, name := t.Metadata.Workspace, t.Metadata.Name
	id := fmt.Sprintf("%s/%s:fired", ws, runName)
	e, err := events.New(id, events.TypeTriggerFired, ws, fmt.Sprintf("/opendlc/workspaces/%s/triggers/%s", ws, name),
		name, time.Now(), events.TriggerFiredData{
			Trigger: name, Source: source, Key: key, StartedKind: string(kind), StartedName: runName,
		})
	var data []byte
	if err == nil {
		data, err = json.Marshal(e)
	}
	if err == nil {
		_, err = d.js.Publish(ctx, events.TriggerFiredSubject(ws, name), data, jetstream.WithMsgID(id))
	}
	if err != nil {
		d.log.Warn("fired event not published", "workspace", ws, "trigger", name, "error", err)
	}
}

// eventAnnotation is the annotation that names the event a run was started for.
func eventAnnotation(eventID string) map[string]string {
	if eventID == "" {
		return nil
	}
	return map[string]string{schemas.AnnotationTriggerEvent: eventID}
}
