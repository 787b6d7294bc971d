package notify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/schemas"
)

// Options configure a Dispatcher.
type Options struct {
	// ConsumerPrefix starts the name of each workspace's durable consumer:
	// "<prefix>-<workspace>".
	ConsumerPrefix string
	// AckWait is how long JetStream waits for an acknowledgement before it delivers an
	// event again. The dispatcher extends it while an event's deliveries are under way.
	AckWait time.Duration
	// MaxAckPending bounds the events of one workspace that are being delivered.
	MaxAckPending int
	// Concurrency bounds the deliveries (HTTP requests, publishes) in flight overall.
	Concurrency int
	// WorkspaceConcurrency bounds the deliveries in flight of one workspace, so that slow
	// endpoints of one workspace leave room for the others.
	WorkspaceConcurrency int
	// MaxCatchUp bounds how far back the consumer of a workspace seen for the first time
	// starts: from the creation of its oldest rule, but no earlier than MaxCatchUp ago.
	MaxCatchUp time.Duration
	// HTTPClient sends webhook requests.
	HTTPClient *http.Client
	// WebhookAllow names the internal destinations the default HTTP client may reach.
	WebhookAllow *AllowList
	// Secrets resolves webhook secretRefs.
	Secrets SecretSource
	// SMTPRootCAs verifies SMTP servers' certificates; nil uses the system's roots.
	SMTPRootCAs *x509.CertPool
	// ConsoleURL is the web console's base URL, from which chat messages and e-mails
	// link to the job, experiment, pipeline or schedule; empty for no link.
	ConsoleURL string
	// Logger receives what goes wrong with deliveries.
	Logger *slog.Logger
	// Metrics counts deliveries and dead letters; nil counts nothing.
	Metrics *metrics.Registry
}

// Option changes Options.
type Option func(*Options) error

var consumerNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// WithConsumerPrefix sets the prefix of the durable consumers' names. Default
// "dlc-notify". Two dispatchers with the same prefix must not run at once: each
// workspace's events would be delivered by both, out of order.
func WithConsumerPrefix(p string) Option {
	return func(o *Options) error {
		if !consumerNameRE.MatchString(p) {
			return fmt.Errorf("notify: consumer prefix %q: letters, digits, '_' and '-' only", p)
		}
		o.ConsumerPrefix = p
		return nil
	}
}

// WithAckWait sets the consumers' ack wait, at least 1s. Default 30s.
func WithAckWait(d time.Duration) Option {
	return dlcjs.AckWaitOption("notify", d, func(o *Options, d time.Duration) { o.AckWait = d })
}

// WithMaxAckPending bounds the events of one workspace being delivered at once. Default
// 1000.
func WithMaxAckPending(n int) Option {
	return func(o *Options) error {
		if n < 1 {
			return fmt.Errorf("notify: max ack pending %d: must be at least 1", n)
		}
		o.MaxAckPending = n
		return nil
	}
}

// WithConcurrency bounds the deliveries in flight overall and per workspace. Default 64
// and 8.
func WithConcurrency(total, perWorkspace int) Option {
	return func(o *Options) error {
		if total < 1 || perWorkspace < 1 {
			return fmt.Errorf("notify: concurrency %d/%d: must be at least 1", total, perWorkspace)
		}
		o.Concurrency, o.WorkspaceConcurrency = total, min(perWorkspace, total)
		return nil
	}
}

// WithMaxCatchUp bounds how far back a new workspace consumer starts. Default 1h.
func WithMaxCatchUp(d time.Duration) Option {
	return func(o *Options) error {
		if d < 0 {
			return fmt.Errorf("notify: max catch-up %s: must not be negative", d)
		}
		o.MaxCatchUp = d
		return nil
	}
}

// WithHTTPClient sets the client of webhook requests. Each request is bounded by its
// rule's timeout whatever the client's own. Default: a client that does not follow
// redirects (a 3xx answer is a failed attempt), uses no proxy, and refuses to connect
// to loopback, private, link-local, multicast, unspecified and other special-purpose
// addresses unless WithWebhookAllowList names them. A client given here is used as it
// is, without those checks.
func WithHTTPClient(c *http.Client) Option {
	return func(o *Options) error { o.HTTPClient = c; return nil }
}

// WithWebhookAllowList names the internal destinations that webhooks may reach despite
// the default client's refusal (see ParseAllowList): address ranges ("10.0.0.0/8"),
// single addresses ("127.0.0.1") and host:port pairs ("hooks.internal:8443").
func WithWebhookAllowList(entries ...string) Option {
	return func(o *Options) error {
		l, err := ParseAllowList(entries)
		if err != nil {
			return err
		}
		o.WebhookAllow = l
		return nil
	}
}

// WithSecrets sets how webhook secretRefs are resolved. Default none: a delivery to a
// webhook with a secretRef fails, and is dead-lettered.
func WithSecrets(s SecretSource) Option {
	return func(o *Options) error { o.Secrets = s; return nil }
}

// WithConsoleURL sets the web console's base URL ("https://dlc.example.com"), which
// chat messages and e-mails link to. Default none: messages carry no link.
func WithConsoleURL(u string) Option {
	return func(o *Options) error {
		if u == "" {
			o.ConsoleURL = ""
			return nil
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return fmt.Errorf("notify: console URL %q: must be an http or https URL", u)
		}
		o.ConsoleURL = u
		return nil
	}
}

// WithSMTPRootCAs sets the certificate authorities that SMTP servers' certificates are
// verified against. Default: the system's.
func WithSMTPRootCAs(pool *x509.CertPool) Option {
	return func(o *Options) error { o.SMTPRootCAs = pool; return nil }
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *Options) error { o.Logger = l; return nil }
}

// WithMetrics counts deliveries and dead letters in r. Default none.
func WithMetrics(r *metrics.Registry) Option {
	return func(o *Options) error { o.Metrics = r; return nil }
}

// Dispatcher delivers events to the targets of the rules that match them. Start one
// with StartDispatcher; Close stops it. One dispatcher runs per consumer prefix.
type Dispatcher struct {
	js     jetstream.JetStream
	o      Options
	log    *slog.Logger
	client *http.Client
	stream jetstream.Stream
	kv     jetstream.KeyValue
	// owned records the consumers the dispatchers created (DLC_NOTIFY_CONSUMERS);
	// ownedSince is when that bucket was made: consumers of the pattern made before
	// are an earlier version's, taken over.
	owned      jetstream.KeyValue
	ownedSince time.Time
	// redriveKV holds the dead letters queued for redelivery (Redriver); notifyStream
	// is DLC_NOTIFY, where the dead letters are.
	redriveKV    jetstream.KeyValue
	notifyStream jetstream.Stream
	stopRedrive  context.CancelFunc
	redriveDone  chan struct{}
	// alerts evaluates the rules' alerts; stopAlerts ends its absent checks.
	alerts     *alerter
	stopAlerts context.CancelFunc
	alertsDone chan struct{}

	// ctx bounds deliveries; cancelling it abandons the unfinished ones.
	ctx    context.Context
	cancel context.CancelFunc
	// stopWatch and stopHeartbeat end those loops.
	stopWatch     context.CancelFunc
	watchDone     chan struct{}
	stopHeartbeat context.CancelFunc
	heartbeatDone chan struct{}
	lanesWG       sync.WaitGroup
	global        chan struct{}
	closeOnce     sync.Once
	closeErr      error

	rmu     sync.RWMutex
	rules   map[string]map[string]*ruleEntry // workspace -> name -> rule
	changed chan struct{}                    // closed and replaced on every rule change
	applied atomic.Uint64
	kick    chan struct{} // asks the watch loop to reconcile now
	// retryDelay is the wait before the watch loop retries a failed reconcile; only the
	// watch loop uses it.
	retryDelay time.Duration

	mu       sync.Mutex
	workers  map[string]*worker // by workspace
	lanes    map[laneKey]*lane
	inflight map[uint64]*pending // by stream sequence
	recent   seqSet
	wsSlots  map[string]chan struct{}
	// redriving are the redrive keys being delivered.
	redriving map[string]bool
}

// ruleEntry is a rule as last read from the bucket.
type ruleEntry struct {
	rule    *schemas.NotificationRule
	rev     uint64
	created time.Time
}

// StartDispatcher loads every rule, starts a durable consumer on DLC_EVENTS for each
// workspace that has rules, and delivers from then on until Close. The DLC_EVENTS
// stream and the DLC_RULES bucket (events/jetstream.EnsureStreams declares both) must
// exist.
//
// A consumer left with unacknowledged events by a dispatcher that crashed or was closed
// mid-delivery is reset to its first unacknowledged event, so those events are
// delivered again, in order, before newer ones.
func StartDispatcher(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Dispatcher, error) {
	o := Options{
		ConsumerPrefix:       DefaultConsumerPrefix,
		AckWait:              30 * time.Second,
		MaxAckPending:        1000,
		Concurrency:          64,
		WorkspaceConcurrency: 8,
		MaxCatchUp:           time.Hour,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	d := &Dispatcher{
		js:        js,
		o:         o,
		log:       o.Logger,
		client:    o.HTTPClient,
		global:    make(chan struct{}, o.Concurrency),
		rules:     map[string]map[string]*ruleEntry{},
		changed:   make(chan struct{}),
		kick:      make(chan struct{}, 1),
		workers:   map[string]*worker{},
		lanes:     map[laneKey]*lane{},
		inflight:  map[uint64]*pending{},
		recent:    newSeqSet(4096),
		wsSlots:   map[string]chan struct{}{},
		redriving: map[string]bool{},
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With("component", "notify")
	if d.client == nil {
		d.client = newWebhookClient(o.WebhookAllow, o.WorkspaceConcurrency)
	}
	var err error
	if d.kv, err = js.KeyValue(ctx, RulesBucket); err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by jetstream.EnsureStreams): %w", RulesBucket, err)
	}
	if d.stream, err = js.Stream(ctx, dlcjs.EventsStream); err != nil {
		return nil, fmt.Errorf("notify: stream %s: %w", dlcjs.EventsStream, err)
	}
	if d.owned, err = js.KeyValue(ctx, dlcjs.NotifyConsumersBucket); err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by jetstream.EnsureStreams): %w", dlcjs.NotifyConsumersBucket, err)
	}
	ownedStream, err := js.Stream(ctx, "KV_"+dlcjs.NotifyConsumersBucket)
	if err != nil {
		return nil, fmt.Errorf("notify: bucket %s: %w", dlcjs.NotifyConsumersBucket, err)
	}
	d.ownedSince = ownedStream.CachedInfo().Created
	if d.redriveKV, err = js.KeyValue(ctx, RedriveBucket); err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by jetstream.EnsureStreams): %w", RedriveBucket, err)
	}
	if d.notifyStream, err = js.Stream(ctx, NotifyStream); err != nil {
		return nil, fmt.Errorf("notify: stream %s: %w", NotifyStream, err)
	}
	alertsKV, err := js.KeyValue(ctx, AlertsBucket)
	if err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by jetstream.EnsureStreams): %w", AlertsBucket, err)
	}
	d.alerts = newAlerter(js, d.stream, alertsKV, d.alertRules, d.log)
	d.alerts.caughtUp = d.caughtUp
	d.ctx, d.cancel = context.WithCancel(context.Background())

	watchCtx, stopWatch := context.WithCancel(context.Background())
	watcher, err := d.kv.WatchAll(watchCtx)
	if err != nil {
		stopWatch()
		d.cancel()
		return nil, fmt.Errorf("notify: watch %s: %w", RulesBucket, err)
	}
	fail := func(err error) (*Dispatcher, error) {
		_ = watcher.Stop()
		stopWatch()
		d.stopWorkers()
		d.cancel()
		d.lanesWG.Wait()
		return nil, err
	}
	last, err := dlcjs.LoadWatched(ctx, watcher, RulesBucket, func(e jetstream.KeyValueEntry) { d.apply(e) })
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(fmt.Errorf("notify: %w", err))
	}
	if err := d.removeOrphanConsumers(ctx); err != nil {
		return fail(err)
	}
	for _, ws := range d.workspaces() {
		if err := d.reconcile(ctx, ws); err != nil {
			return fail(err)
		}
	}
	d.applied.Store(last)

	d.stopWatch, d.watchDone = stopWatch, make(chan struct{})
	go d.watch(watchCtx, watcher)
	redriveCtx, stopRedrive := context.WithCancel(context.Background())
	redriveWatcher, err := d.redriveKV.WatchAll(redriveCtx)
	if err != nil {
		stopRedrive()
		d.stopWatch()
		<-d.watchDone
		return fail(fmt.Errorf("notify: watch %s: %w", RedriveBucket, err))
	}
	d.stopRedrive, d.redriveDone = stopRedrive, make(chan struct{})
	go d.watchRedrive(redriveCtx, redriveWatcher)
	hbCtx, stopHeartbeat := context.WithCancel(context.Background())
	d.stopHeartbeat, d.heartbeatDone = stopHeartbeat, make(chan struct{})
	go d.heartbeat(hbCtx)
	alertsCtx, stopAlerts := context.WithCancel(context.Background())
	d.stopAlerts, d.alertsDone = stopAlerts, make(chan struct{})
	go d.checkAbsent(alertsCtx)
	return d, nil
}

// AppliedRevision is the DLC_RULES revision of the newest rule change the dispatcher has
// put into effect: a rule stored by Store.Put with revision r applies to events read
// after AppliedRevision() >= r.
func (d *Dispatcher) AppliedRevision() uint64 { return d.applied.Load() }

// Close stops reading events, lets the deliveries under way finish until ctx ends, then
// abandons the rest, unacknowledged: the next dispatcher delivers them again. It
// returns an error when it abandoned deliveries.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.closeOnce.Do(func() { d.closeErr = d.close(ctx) })
	return d.closeErr
}

func (d *Dispatcher) close(ctx context.Context) error {
	d.stopAlerts()
	<-d.alertsDone
	d.stopWatch()
	<-d.watchDone
	d.stopRedrive()
	<-d.redriveDone
	d.stopWorkers()

	drained := make(chan struct{})
	go func() { d.lanesWG.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
	}
	d.cancel()
	<-drained
	d.stopHeartbeat()
	<-d.heartbeatDone

	d.mu.Lock()
	abandoned := 0
	for _, p := range d.inflight {
		if !p.w.retired.Load() {
			abandoned++
		}
	}
	d.mu.Unlock()
	if abandoned == 0 {
		return nil
	}
	cause := context.Cause(ctx)
	if cause == nil {
		cause = errors.New("acknowledgements failed")
	}
	return fmt.Errorf("notify: closed with %d events not fully delivered; they are delivered again when a dispatcher starts: %w",
		abandoned, cause)
}

// stopWorkers stops every workspace's reading, keeping the consumers.
func (d *Dispatcher) stopWorkers() {
	d.mu.Lock()
	ws := make([]*worker, 0, len(d.workers))
	for _, w := range d.workers {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	for _, w := range ws {
		w.stop()
		<-w.done
	}
}

// heartbeat tells JetStream that the events being delivered are still in progress, so
// that they are not delivered again while a slow delivery retries.
func (d *Dispatcher) heartbeat(ctx context.Context) {
	defer close(d.heartbeatDone)
	t := time.NewTicker(d.o.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		msgs := make([]jetstream.Msg, 0, len(d.inflight))
		for _, p := range d.inflight {
			if !p.w.retired.Load() {
				msgs = append(msgs, p.msg)
			}
		}
		d.mu.Unlock()
		for _, m := range msgs {
			if err := m.InProgress(); err != nil {
				d.log.Warn("extending ack wait", "subject", m.Subject(), "error", err)
			}
		}
	}
}

// watch applies rule changes as they are stored, and retries what reconcile could not do.
func (d *Dispatcher) watch(ctx context.Context, watcher jetstream.KeyWatcher) {
	defer close(d.watchDone)
	defer func() {
		// nil when the dispatcher was closed while it could not watch again.
		if watcher != nil {
			_ = watcher.Stop()
		}
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-watcher.Updates():
			if !ok {
				// The watcher ended (its connection closed); start another, which reads
				// every current rule again.
				_ = watcher.Stop()
				if watcher = dlcjs.Rewatch(ctx, d.kv, d.log, "rules"); watcher == nil {
					return
				}
				continue
			}
			if e == nil {
				continue
			}
			if ws := d.apply(e); ws != "" {
				d.reconcileLogged(ctx, ws)
			}
			d.applied.Store(max(d.applied.Load(), e.Revision()))
		case <-tick.C:
			for _, ws := range d.workspaces() {
				d.reconcileLogged(ctx, ws)
			}
		case <-d.kick:
			for _, ws := range d.workspaces() {
				d.reconcileLogged(ctx, ws)
			}
		}
	}
}

// reconcileLogged is reconcile for the watch loop: what fails is retried soon, with a
// growing delay, and again at every tick.
func (d *Dispatcher) reconcileLogged(ctx context.Context, ws string) {
	err := d.reconcile(ctx, ws)
	if err == nil {
		d.retryDelay = 0
		return
	}
	if ctx.Err() != nil {
		return
	}
	d.retryDelay = min(max(2*d.retryDelay, 100*time.Millisecond), 5*time.Second)
	d.log.Error("starting or stopping a workspace; retrying", "workspace", ws, "in", d.retryDelay, "error", err)
	time.AfterFunc(d.retryDelay, func() {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	})
}

// apply records one change of the bucket and returns the workspace it concerns.
func (d *Dispatcher) apply(e jetstream.KeyValueEntry) string {
	ws, name, ok := splitKey(e.Key())
	if !ok {
		d.log.Error("ignoring a key of the rules bucket that is not <workspace>.<name>", "key", e.Key())
		return ""
	}
	var entry *ruleEntry
	if e.Operation() == jetstream.KeyValuePut {
		r, err := decodeRule(e.Value())
		switch {
		case err != nil:
			d.log.Error("ignoring an invalid rule", "workspace", ws, "rule", name, "error", err)
		case r.Metadata.Workspace != ws || r.Metadata.Name != name:
			d.log.Error("ignoring a rule stored under another key", "key", e.Key(),
				"workspace", r.Metadata.Workspace, "rule", r.Metadata.Name)
		default:
			entry = &ruleEntry{rule: r, rev: e.Revision(), created: e.Created()}
		}
	}
	d.rmu.Lock()
	if entry != nil {
		if d.rules[ws] == nil {
			d.rules[ws] = map[string]*ruleEntry{}
		}
		d.rules[ws][name] = entry
	} else if d.rules[ws] != nil {
		delete(d.rules[ws], name)
		if len(d.rules[ws]) == 0 {
			delete(d.rules, ws)
		}
	}
	close(d.changed)
	d.changed = make(chan struct{})
	d.rmu.Unlock()
	return ws
}

// workspaces returns the workspaces that have rules or a worker, sorted.
func (d *Dispatcher) workspaces() []string {
	var ws []string
	d.rmu.RLock()
	for w := range d.rules {
		ws = append(ws, w)
	}
	d.rmu.RUnlock()
	d.mu.Lock()
	for w := range d.workers {
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	d.mu.Unlock()
	slices.Sort(ws)
	return ws
}

// ruleEntry returns the current rule of that name, or nil.
func (d *Dispatcher) ruleEntry(ws, name string) *ruleEntry {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	return d.rules[ws][name]
}

// rulesChanged returns a channel that is closed at the next rule change.
func (d *Dispatcher) rulesChanged() <-chan struct{} {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	return d.changed
}

// match returns a task for every target of every rule of the event's workspace that
// matches it, in rule name order.
func (d *Dispatcher) match(ev *event) []*task {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	rules := d.rules[ev.workspace]
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	slices.Sort(names)
	var tasks []*task
	for _, n := range names {
		r := rules[n].rule
		if r.Spec.Alert != nil {
			// An alert rule delivers its own alert events only; its match selects the
			// jobs it watches.
			if ev.env.Type != events.TypeAlert || ev.subject != events.AlertSubject(ev.workspace, n) || ev.data.Rule != n {
				continue
			}
		} else if !r.Spec.Match.Matches(ev.facts) {
			continue
		}
		if r.Spec.Webhook != nil {
			tasks = append(tasks, &task{ev: ev, rule: n, target: targetWebhook})
		}
		if r.Spec.Email != nil {
			tasks = append(tasks, &task{ev: ev, rule: n, target: targetEmail})
		}
		if r.Spec.Subject != "" {
			tasks = append(tasks, &task{ev: ev, rule: n, target: targetSubject})
		}
	}
	return tasks
}

// removeOrphanConsumers deletes the consumers of workspaces that no longer have rules,
// so that a rule created later does not receive the events of the time without rules.
func (d *Dispatcher) removeOrphanConsumers(ctx context.Context) error {
	byWS, err := workspaceConsumers(ctx, d.stream, d.o.ConsumerPrefix)
	if err != nil {
		return err
	}
	var orphans []string
	var keys []string
	d.rmu.RLock()
	for ws, infos := range byWS {
		if _, has := d.rules[ws]; !has {
			for _, c := range infos {
				orphans = append(orphans, c.Name)
			}
			keys = append(keys, registryKey(d.o.ConsumerPrefix, ws))
		}
	}
	d.rmu.RUnlock()
	for _, name := range orphans {
		if err := d.stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("notify: delete consumer %s: %w", name, err)
		}
	}
	for _, k := range keys {
		if err := d.owned.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("notify: bucket %s: %w", dlcjs.NotifyConsumersBucket, err)
		}
	}
	return nil
}

// reconcile starts the worker of a workspace that has rules and retires the worker of
// one that has none.
func (d *Dispatcher) reconcile(ctx context.Context, ws string) error {
	d.rmu.RLock()
	rules := d.rules[ws]
	var since time.Time
	for _, e := range rules {
		if since.IsZero() || e.created.Before(since) {
			since = e.created
		}
	}
	has := len(rules) > 0
	d.rmu.RUnlock()

	d.mu.Lock()
	w := d.workers[ws]
	d.mu.Unlock()

	if w != nil && !has && !w.retired.Load() {
		w.retired.Store(true)
		w.stop()
		<-w.done
	}
	if w != nil && w.retired.Load() {
		// Delete the consumer before a new rule can start another, so that the new rule
		// does not see the events of the time without rules.
		err := d.stream.DeleteConsumer(ctx, w.consumer)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("notify: delete consumer %s: %w", w.consumer, err)
		}
		if err := d.owned.Delete(ctx, registryKey(d.o.ConsumerPrefix, ws)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("notify: bucket %s: %w", dlcjs.NotifyConsumersBucket, err)
		}
		d.mu.Lock()
		delete(d.workers, ws)
		d.mu.Unlock()
		w = nil
	}
	if w == nil && has {
		if earliest := time.Now().Add(-d.o.MaxCatchUp); since.Before(earliest) {
			since = earliest
		}
		w, err := d.startWorker(ctx, ws, since)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.workers[ws] = w
		d.mu.Unlock()
	}
	return nil
}

// startWorker creates or resumes the durable consumer of a workspace and starts reading
// it. A new consumer starts at since.
func (d *Dispatcher) startWorker(ctx context.Context, ws string, since time.Time) (*worker, error) {
	name, stale, from, err := d.consumerFor(ctx, ws)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "OpenDLC notifications of workspace " + ws,
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &since,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       d.o.AckWait,
		MaxDeliver:    -1,
		FilterSubject: "dlc." + ws + ".>",
		MaxAckPending: d.o.MaxAckPending,
	}
	if from != nil {
		takeOver(&cfg, from)
	}
	cons, err := d.stream.Consumer(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if cons, err = d.stream.CreateConsumer(ctx, cfg); err != nil {
			return nil, fmt.Errorf("notify: create consumer %s: %w", name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("notify: consumer %s: %w", name, err)
	default:
		info := cons.CachedInfo()
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = info.Config.DeliverPolicy, info.Config.OptStartTime, info.Config.OptStartSeq
		if cons, err = d.stream.UpdateConsumer(ctx, cfg); err != nil {
			return nil, fmt.Errorf("notify: update consumer %s: %w", name, err)
		}
		if info.NumAckPending > 0 {
			// A previous dispatcher left events unacknowledged. Left alone, JetStream would
			// deliver them again only after AckWait, after newer events: rewind to the
			// first unacknowledged event instead, so that order holds.
			if _, err := d.stream.ResetConsumer(ctx, name); err != nil {
				d.log.Warn("cannot rewind the consumer: unfinished events are delivered again after the ack wait, maybe out of order",
					"consumer", name, "error", err)
			}
		}
	}
	for _, c := range stale {
		// An earlier version's consumer, which the new one has taken over, or one that
		// someone else made with a name like the dispatcher's: never read, deleted.
		if err := d.stream.DeleteConsumer(ctx, c); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("notify: delete consumer %s: %w", c, err)
		}
	}
	w := &worker{ws: ws, consumer: name, cons: cons, done: make(chan struct{})}
	var fetchCtx context.Context
	fetchCtx, w.cancel = context.WithCancel(context.Background())
	go d.fetch(fetchCtx, w)
	return w, nil
}

// fetch reads a workspace's events in order and hands each to handle.
func (d *Dispatcher) fetch(ctx context.Context, w *worker) {
	defer close(w.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := w.cons.Messages(jetstream.PullMaxMessages(min(256, d.o.MaxAckPending)))
		if err != nil {
			d.log.Warn("reading events", "workspace", w.ws, "error", err)
		} else {
			for {
				m, err := it.Next(jetstream.NextContext(ctx))
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
						// Someone deleted the consumer: give up this worker, whose events
						// can no longer be acknowledged; reconcile starts another.
						d.log.Error("consumer deleted; starting another", "workspace", w.ws, "consumer", w.consumer)
						w.retired.Store(true)
						it.Stop()
						select {
						case d.kick <- struct{}{}:
						default:
						}
						return
					}
					d.log.Warn("reading events", "workspace", w.ws, "error", err)
					break
				}
				backoff = 100 * time.Millisecond
				d.handle(w, m)
			}
			it.Stop()
		}
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// handle matches one event and queues its deliveries, or acknowledges it when nothing
// matches.
func (d *Dispatcher) handle(w *worker, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		d.log.Error("event without metadata", "subject", m.Subject(), "error", err)
		return
	}
	seq := md.Sequence.Stream
	d.mu.Lock()
	if p, ok := d.inflight[seq]; ok {
		// Delivered again while still being delivered (the ack wait passed): keep going
		// with the first copy, and acknowledge the newest.
		p.msg = m
		d.mu.Unlock()
		d.alerts.saw(w.ws, seq)
		return
	}
	if d.recent.has(seq) {
		d.mu.Unlock()
		_ = m.Ack()
		d.alerts.saw(w.ws, seq)
		return
	}
	d.mu.Unlock()

	ev, err := parseEvent(m.Subject(), m.Data())
	if err == nil && ev.workspace != w.ws {
		err = fmt.Errorf("event of workspace %q read for workspace %q", ev.workspace, w.ws)
	}
	if err != nil {
		d.log.Error("dropping an event that cannot be delivered", "subject", m.Subject(), "seq", seq, "error", err)
		_ = m.Term()
		d.alerts.saw(w.ws, seq)
		return
	}
	ev.seq = seq
	if !d.observeAlerts(w, ev) {
		return // the dispatcher is closing: the event stays unacknowledged
	}
	d.alerts.saw(w.ws, seq)
	tasks := d.match(ev)
	if len(tasks) == 0 {
		_ = m.Ack()
		return
	}
	p := &pending{msg: m, seq: seq, w: w, remaining: len(tasks)}
	d.mu.Lock()
	d.inflight[seq] = p
	for _, t := range tasks {
		t.p = p
		d.enqueueLocked(t)
	}
	d.mu.Unlock()
}

// observeAlerts applies ev to the workspace's alerts, retrying until NATS answers, so
// that the workspace's events are evaluated in order. It reports false when the worker
// stopped first.
func (d *Dispatcher) observeAlerts(w *worker, ev *event) bool {
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
		err := d.alerts.observe(ctx, ev)
		cancel()
		if err == nil {
			return true
		}
		if d.ctx.Err() != nil || w.retired.Load() {
			return false
		}
		d.log.Warn("evaluating alerts; retrying", "workspace", ev.workspace, "event", ev.id, "error", err)
		if !sleepCtx(d.ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// caughtUp reports whether the dispatcher has observed every event of the workspace
// that its consumer holds: none is left to deliver, and the last delivered was handled.
func (d *Dispatcher) caughtUp(ctx context.Context, ws string) bool {
	d.mu.Lock()
	w := d.workers[ws]
	d.mu.Unlock()
	if w == nil || w.retired.Load() {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	info, err := w.cons.Info(ictx)
	if err != nil {
		return false
	}
	return info.NumPending == 0 && d.alerts.seenUpTo(ws) >= info.Delivered.Stream
}

// checkAbsent checks the absent metrics of the alert rules until ctx ends.
func (d *Dispatcher) checkAbsent(ctx context.Context) {
	defer close(d.alertsDone)
	t := time.NewTicker(alertTick)
	defer t.Stop()
	var swept map[string]bool // the alert rules at the last sweep; nil before the first
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if live := d.alertRuleNames(); swept == nil || !maps.Equal(live, swept) {
			if err := d.alerts.sweep(ctx, live); err != nil {
				if ctx.Err() == nil {
					d.log.Warn("forgetting the alerts of deleted rules; retrying", "error", err)
				}
			} else {
				swept = live
			}
		}
		d.alerts.tick(ctx, d.workspaces())
	}
}

// alertRuleNames returns "<workspace>.<rule>" of every rule with an alert.
func (d *Dispatcher) alertRuleNames() map[string]bool {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	out := map[string]bool{}
	for ws, rules := range d.rules {
		for n, e := range rules {
			if e.rule.Spec.Alert != nil {
				out[ws+"."+n] = true
			}
		}
	}
	return out
}

// finish counts one task of p as done and acknowledges p's event when it was the last.
func (d *Dispatcher) finish(p *pending) {
	d.mu.Lock()
	p.remaining--
	if p.remaining > 0 {
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()

	backoff := 100 * time.Millisecond
	for !p.w.retired.Load() {
		d.mu.Lock()
		m := p.msg
		d.mu.Unlock()
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		err := m.DoubleAck(ctx)
		cancel()
		if err == nil {
			break
		}
		if d.ctx.Err() != nil {
			return // abandoned: the event stays unacknowledged, and is delivered again
		}
		d.log.Warn("acknowledging an event", "subject", m.Subject(), "seq", p.seq, "error", err)
		if !sleepCtx(d.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	d.mu.Lock()
	delete(d.inflight, p.seq)
	d.recent.add(p.seq)
	d.mu.Unlock()
}

// worker reads one workspace's consumer.
type worker struct {
	ws       string
	consumer string
	cons     jetstream.Consumer
	cancel   context.CancelFunc
	done     chan struct{}
	// retired: the workspace has no rules left, or its consumer was deleted; the
	// consumer is (to be) deleted, and the worker's unfinished deliveries are dropped.
	retired atomic.Bool
}

func (w *worker) stop() { w.cancel() }

// pending is an event being delivered: it is acknowledged when remaining reaches 0.
type pending struct {
	msg       jetstream.Msg // guarded by Dispatcher.mu
	seq       uint64
	w         *worker
	remaining int // guarded by Dispatcher.mu
}

// seqSet remembers the last n stream sequences added.
type seqSet struct {
	ring []uint64
	next int
	set  map[uint64]struct{}
}

func newSeqSet(n int) seqSet {
	return seqSet{ring: make([]uint64, n), set: make(map[uint64]struct{}, n)}
}

func (s *seqSet) has(seq uint64) bool { _, ok := s.set[seq]; return ok }

func (s *seqSet) add(seq uint64) {
	if old := s.ring[s.next]; old != 0 {
		delete(s.set, old)
	}
	s.ring[s.next] = seq
	s.set[seq] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

// sleepCtx waits for d or until ctx ends; it reports whether the wait was complete.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
