package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/jstest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// testSecret signs the webhooks of the rules built by webhookRule.
const testSecret = "s3cret-for-tests-0123"

// env is one test's NATS server with OpenDLC's streams and the rule store.
type env struct {
	t      *testing.T
	ctx    context.Context
	events *dlcjs.Client
	js     jetstream.JetStream
	store  *notify.Store

	mu      sync.Mutex
	lastSeq map[string]uint64 // the newest DLC_EVENTS sequence of each workspace
}

// newEnv starts an embedded NATS server in a temporary directory, creates every
// stream, and opens the rule store.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	c, _ := jstest.Start(t, ctx)
	store, err := notify.OpenStore(ctx, c.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NATS with streams ready in %v", time.Since(start).Round(time.Millisecond))
	return &env{t: t, ctx: ctx, events: c, js: c.JetStream(), store: store, lastSeq: map[string]uint64{}}
}

// start starts a dispatcher that the test's cleanup closes.
func (e *env) start(opts ...notify.Option) *notify.Dispatcher {
	e.t.Helper()
	// The receivers listen on 127.0.0.1, which webhooks reach only when allowed.
	opts = append([]notify.Option{notify.WithLogger(testLogger(e.t)), notify.WithWebhookAllowList("127.0.0.1")}, opts...)
	d, err := notify.StartDispatcher(e.ctx, e.js, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	return d
}

// put stores a rule and waits until d applies it.
func (e *env) put(d *notify.Dispatcher, r *schemas.NotificationRule) {
	e.t.Helper()
	rev, err := e.store.Put(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Put %s: %v", r.Metadata.Name, err)
	}
	if d != nil {
		testutil.Eventually(e.t, notifyWait, fmt.Sprintf("revision %d applied", rev), func() bool { return d.AppliedRevision() >= rev })
	}
}

// restartDelivers starts a new dispatcher and checks that rc then has received want,
// in order, once ws's events are processed; it logs how long that took after the start.
func (e *env) restartDelivers(rc *receiver, ws string, want []string, what string) {
	e.t.Helper()
	start := time.Now()
	e.start()
	rc.waitDelivered(len(want))
	e.t.Logf("%s in %v after the restart", what, time.Since(start).Round(time.Millisecond))
	e.waitProcessed(ws)
	wantEqual(e.t, "delivered", want, rc.delivered())
}

// phase publishes a phase event of job in ws, as the TrainingJob workflow does, and
// returns it with its encoding.
func (e *env) phase(ws, job string, seq int, phase schemas.JobPhase, labels map[string]string) published {
	e.t.Helper()
	uid := ws + "-" + job + "-uid"
	ev, err := events.New(fmt.Sprintf("%s:status:%d", uid, seq), events.TypeJobPhase, ws,
		events.JobSource(ws, job), job, time.Now(),
		events.JobPhaseData{Job: job, UID: uid, Seq: seq, Phase: string(phase), Labels: labels, Framework: "pytorch"})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.publish(ws, events.JobStatusSubject(ws, job), ev)
}

// metric publishes a metric event of job in ws.
// running publishes events from to to (inclusive) of job in ws, each phase Running,
// and answers their ids in order.
func (e *env) running(ws, job string, from, to int) []string {
	var ids []string
	for seq := from; seq <= to; seq++ {
		ids = append(ids, e.phase(ws, job, seq, schemas.JobRunning, nil).id)
	}
	return ids
}

func (e *env) metric(ws, job string, seq int64) published {
	e.t.Helper()
	uid := ws + "-" + job + "-uid"
	ev, err := events.New(fmt.Sprintf("%s:a0:worker-0:m%d", uid, seq), events.TypeJobMetric, ws,
		events.JobSource(ws, job), job, time.Now(),
		events.MetricData{Job: job, UID: uid, Replica: "worker-0", Seq: seq, Values: map[string]float64{"loss": 0.5}})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.publish(ws, events.JobMetricsSubject(ws, job), ev)
}

// publish publishes as events/jetstream.Client.Publish does, noting the sequence.
func (e *env) publish(ws, subject string, ev events.Event) published {
	e.t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	ack, err := e.js.Publish(e.ctx, subject, data, jetstream.WithMsgID(ev.ID))
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.lastSeq[ws] = max(e.lastSeq[ws], ack.Sequence)
	e.mu.Unlock()
	return published{id: ev.ID, data: data}
}

// published is an event as it was published.
type published struct {
	id   string
	data []byte
}

func ids(ps ...published) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.id
	}
	return out
}

// waitProcessed waits until the dispatcher has acknowledged every event of workspace
// ws published so far: then every delivery of those events is done.
func (e *env) waitProcessed(ws string) {
	e.t.Helper()
	e.mu.Lock()
	seq := e.lastSeq[ws]
	e.mu.Unlock()
	testutil.Eventually(e.t, notifyWait, fmt.Sprintf("events of %s up to #%d acknowledged", ws, seq), func() error {
		c, err := e.consumer(ws)
		if err != nil {
			return err
		}
		info := c.CachedInfo()
		if info.AckFloor.Stream < seq || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor #%d, %d pending, %d unacknowledged", info.AckFloor.Stream, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// consumer is workspace ws's durable consumer (its name has a random part);
// jetstream.ErrConsumerNotFound when it has none.
func (e *env) consumer(ws string) (jetstream.Consumer, error) {
	name, err := notify.ConsumerNameOf(e.ctx, e.js, notify.DefaultConsumerPrefix, ws)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, jetstream.ErrConsumerNotFound
	}
	return e.js.Consumer(e.ctx, dlcjs.EventsStream, name)
}

// notifyMsgs returns every message of DLC_NOTIFY on subject, in order.
func (e *env) notifyMsgs(subject string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, notify.NotifyStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(e.ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls cond every 10ms until it holds, failing the test after 30s. detail,
// when given, says what was seen last.
// wantEqual fails t, showing what and the difference, unless got equals want.
func wantEqual(t *testing.T, what string, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// notifyWait bounds the tests' waits for deliveries, acknowledgements and dead letters.
const notifyWait = 30 * time.Second

// webhookRule returns a rule of ws that posts every phase event to url, signed with
// testSecret, retrying quickly.
func webhookRule(ws, name, url string, mutate ...func(*schemas.NotificationRule)) *schemas.NotificationRule {
	r := &schemas.NotificationRule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindNotificationRule,
		Metadata:   schemas.ObjectMeta{Name: name, Workspace: ws},
		Spec: schemas.NotificationRuleSpec{
			Match:   schemas.NotificationMatch{Types: []string{events.TypeJobPhase}},
			Webhook: &schemas.WebhookTarget{URL: url, Secret: testSecret, Timeout: schemas.Duration(10 * time.Second)},
			Delivery: schemas.DeliveryPolicy{Backoff: schemas.Backoff{
				Initial: schemas.Duration(10 * time.Millisecond), Max: schemas.Duration(40 * time.Millisecond)}},
		},
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

// request is one webhook request a receiver got.
type request struct {
	url     string // the request URI: path and query
	body    []byte
	header  http.Header
	eventID string
	attempt int
	status  int // what the receiver answered
	phase   events.JobPhaseData
}

// receiver is a webhook endpoint on 127.0.0.1. respond decides each answer from the
// request and how many requests for the same event came before it.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	respond atomic.Pointer[func(r *http.Request, prior int) int]
	// answer, when set, makes the body of each answer; else the status text.
	answer atomic.Pointer[func(prior int) string]

	mu   sync.Mutex
	reqs []request
}

func newReceiver(t *testing.T, respond func(r *http.Request, prior int) int) *receiver {
	rc := &receiver{t: t}
	rc.setRespond(respond)
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func ok(*http.Request, int) int { return http.StatusOK }

func (rc *receiver) setRespond(f func(r *http.Request, prior int) int) { rc.respond.Store(&f) }

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	req := request{url: r.URL.String(), body: body, header: r.Header.Clone(), eventID: r.Header.Get(notify.HeaderEventID)}
	req.attempt, _ = strconv.Atoi(r.Header.Get(notify.HeaderAttempt))
	var ev events.Event
	if json.Unmarshal(body, &ev) == nil {
		_ = json.Unmarshal(ev.Data, &req.phase)
	}
	rc.mu.Lock()
	prior := 0
	for _, q := range rc.reqs {
		if q.eventID == req.eventID {
			prior++
		}
	}
	idx := len(rc.reqs)
	rc.reqs = append(rc.reqs, req)
	rc.mu.Unlock()

	status := (*rc.respond.Load())(r, prior)
	rc.mu.Lock()
	rc.reqs[idx].status = status
	rc.mu.Unlock()
	w.WriteHeader(status)
	if a := rc.answer.Load(); a != nil {
		_, _ = io.WriteString(w, (*a)(prior))
		return
	}
	_, _ = io.WriteString(w, http.StatusText(status))
}

// newPlatformReceiver is a receiver that answers 200 with the body answer makes, as
// chat platforms do, also when they refuse a message.
func newPlatformReceiver(t *testing.T, answer func(prior int) string) *receiver {
	rc := newReceiver(t, ok)
	rc.answer.Store(&answer)
	return rc
}

// all returns every request so far.
func (rc *receiver) all() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// delivered returns the event ids of the requests answered 2xx, in arrival order.
func (rc *receiver) delivered() []string {
	var out []string
	for _, r := range rc.all() {
		if r.status >= 200 && r.status < 300 {
			out = append(out, r.eventID)
		}
	}
	return out
}

// waitDelivered waits until n requests were answered 2xx.
func (rc *receiver) waitDelivered(n int) {
	rc.t.Helper()
	testutil.Eventually(rc.t, notifyWait, fmt.Sprintf("%d deliveries", n), func() error {
		if got := rc.delivered(); len(got) < n {
			return fmt.Errorf("delivered %q", got)
		}
		return nil
	})
}

// testLogger writes the dispatcher's log to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
