package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Target kinds, as written in dead letters and message ids.
const (
	targetWebhook = "webhook"
	targetSubject = "subject"
	targetEmail   = "email"
)

// publishTimeout bounds one publish to NATS.
const publishTimeout = 10 * time.Second

// userAgent is sent with webhook requests unless a rule sets its own.
const userAgent = "OpenDLC-Notify/1"

// DeadLetter is what a rule's dead-letter subject receives for a delivery that failed
// every attempt. Its Nats-Msg-Id is "<event id>:<rule>:<target>:deadletter".
type DeadLetter struct {
	// Event is the CloudEvent, exactly as it was published.
	Event json.RawMessage `json:"event"`
	// EventID is the event's id.
	EventID string `json:"eventId"`
	// StreamSequence is the event's sequence in DLC_EVENTS.
	StreamSequence uint64 `json:"streamSequence"`
	// Workspace and Rule name the rule that matched the event.
	Workspace string `json:"workspace"`
	// Rule is the rule's name.
	Rule string `json:"rule"`
	// Target is "webhook", "email" or "subject".
	Target string `json:"target"`
	// Destination is the webhook URL, the e-mail recipients or the subject.
	Destination string `json:"destination"`
	// Attempts is how many times delivery was tried.
	Attempts int `json:"attempts"`
	// Status is the HTTP status of the last attempt's answer; 0 when there was none (the
	// destination was refused, unreachable or too slow) or for a subject.
	Status int `json:"status,omitempty"`
	// Error is what went wrong with the last attempt: at most 300 bytes of printable
	// text, never the webhook's response body.
	Error string `json:"error"`
	// FirstAttempt and LastAttempt are when delivery was first and last tried.
	FirstAttempt time.Time `json:"firstAttempt"`
	// LastAttempt is when the last attempt ended.
	LastAttempt time.Time `json:"lastAttempt"`
}

// event is what a delivery needs of one event.
type event struct {
	raw       []byte // the CloudEvent as published: the webhook body, the signed bytes
	subject   string
	id        string
	workspace string
	facts     schemas.EventFacts
	env       events.Event
	data      eventData
	seq       uint64
}

// parseEvent reads an event from DLC_EVENTS. The workspace is the subject's
// (dlc.<workspace>....), which NATS permissions protect; an envelope that claims another
// workspace is refused.
func parseEvent(subject string, data []byte) (*event, error) {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 3 || tokens[0] != "dlc" || !dnsLabelRE.MatchString(tokens[1]) {
		return nil, fmt.Errorf("subject %q is not dlc.<workspace>....", subject) //nolint:revive,staticcheck // the message names the subject form
	}
	ws := tokens[1]
	var env events.Event
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("not a CloudEvent: %w", err)
	}
	if env.ID == "" {
		return nil, errors.New("event without an id")
	}
	if env.Workspace != "" && env.Workspace != ws {
		return nil, fmt.Errorf("event of workspace %q published on %s", env.Workspace, subject)
	}
	var d eventData
	// Data that is not an object has no phase, job or labels to match.
	_ = json.Unmarshal(env.Data, &d)
	job := d.Job
	if job == "" && d.Experiment == "" && d.Pipeline == "" && d.Schedule == "" {
		job = env.Subject
	}
	phase := d.Phase
	return &event{
		raw:       data,
		subject:   subject,
		id:        env.ID,
		workspace: ws,
		env:       env,
		data:      d,
		facts: schemas.EventFacts{Type: env.Type, Job: job, Phase: phase, Labels: d.Labels, Reason: d.Reason,
			Experiment: d.Experiment, Pipeline: d.Pipeline, Schedule: d.Schedule},
	}, nil
}

// eventData is what notifications read of an event's data: the fields the events of
// jobs, experiments, trials, pipelines and schedules share or name them by.
type eventData struct {
	Job        string            `json:"job"`
	Experiment string            `json:"experiment"`
	Pipeline   string            `json:"pipeline"`
	Schedule   string            `json:"schedule"`
	Step       string            `json:"step"`
	Trial      string            `json:"trial"`
	Phase      string            `json:"phase"`
	Previous   string            `json:"previous"`
	Reason     string            `json:"reason"`
	Message    string            `json:"message"`
	Action     string            `json:"action"`
	Labels     map[string]string `json:"labels"`
	// Rule, State and Metric are an alert's (events.AlertData).
	Rule   string `json:"rule"`
	State  string `json:"state"`
	Metric string `json:"metric"`
}

// order is the key that orders deliveries: the job, experiment, pipeline or schedule
// the event is about, so that its events arrive in order.
func (ev *event) order() string {
	switch {
	case ev.facts.Pipeline != "":
		return "pipeline/" + ev.facts.Pipeline
	case ev.facts.Experiment != "":
		return "experiment/" + ev.facts.Experiment
	case ev.facts.Schedule != "":
		return "schedule/" + ev.facts.Schedule
	}
	return ev.facts.Job
}

// task is the delivery of one event to one target of one rule.
type task struct {
	ev     *event
	rule   string
	target string
	p      *pending
	// redrive is the DLC_NOTIFY sequence of the dead letter this delivery redrives; 0
	// for a first delivery.
	redrive uint64
}

// laneKey names an ordered sequence of deliveries: one rule's target, one job (or
// experiment, pipeline, schedule).
type laneKey struct {
	workspace, rule, target, job string
}

// lane delivers its tasks one at a time, in the order they were queued.
type lane struct {
	key     laneKey
	queue   []*task
	running bool
}

// enqueueLocked appends t to its lane, starting the lane's goroutine when idle.
// d.mu is held.
func (d *Dispatcher) enqueueLocked(t *task) {
	k := laneKey{t.ev.workspace, t.rule, t.target, t.ev.order()}
	l := d.lanes[k]
	if l == nil {
		l = &lane{key: k}
		d.lanes[k] = l
	}
	l.queue = append(l.queue, t)
	if !l.running {
		l.running = true
		d.lanesWG.Add(1)
		go d.runLane(l)
	}
}

func (d *Dispatcher) runLane(l *lane) {
	defer d.lanesWG.Done()
	for {
		d.mu.Lock()
		if len(l.queue) == 0 || d.ctx.Err() != nil {
			l.running = false
			if len(l.queue) == 0 {
				delete(d.lanes, l.key)
			}
			d.mu.Unlock()
			return
		}
		t := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		d.mu.Unlock()
		if d.deliver(t) {
			d.finish(t.p)
		}
	}
}

// deliver tries t until it is delivered or dead-lettered, and reports true; or until
// the dispatcher abandons it, and reports false. A rule that is deleted (or loses the
// target) meanwhile drops the delivery; a rule that changes takes effect at the next
// attempt, which starts at once.
func (d *Dispatcher) deliver(t *task) bool {
	first := time.Now()
	for attempt := 1; ; attempt++ {
		if t.p.w.retired.Load() {
			return true
		}
		e := d.ruleEntry(t.ev.workspace, t.rule)
		if e == nil || !hasTarget(e.rule, t.target) {
			d.log.Info("rule deleted or its target removed; delivery dropped", "workspace", t.ev.workspace, "rule", t.rule,
				"target", t.target, "event", t.ev.id)
			return true
		}
		err := d.attempt(t, e.rule, attempt)
		if d.ctx.Err() == nil {
			d.o.Metrics.NotificationDelivery(t.target, err)
		}
		if err == nil {
			return true
		}
		if d.ctx.Err() != nil {
			return false
		}
		if attempt >= int(e.rule.Spec.Delivery.MaxAttempts) {
			return d.deadLetter(t, e.rule, attempt, first, err)
		}
		d.log.Debug("delivery failed; retrying", "workspace", t.ev.workspace, "rule", t.rule,
			"target", t.target, "event", t.ev.id, "attempt", attempt, "error", err)
		if !d.backoff(t, e, e.rule.Spec.Delivery.Backoff.Delay(attempt)) {
			return false
		}
	}
}

// backoff waits delay before the next attempt, or less when the rule changes. It
// reports false when the dispatcher abandons deliveries.
func (d *Dispatcher) backoff(t *task, e *ruleEntry, delay time.Duration) bool {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		changed := d.rulesChanged()
		if cur := d.ruleEntry(t.ev.workspace, t.rule); cur == nil || cur.rev != e.rev {
			return true
		}
		select {
		case <-timer.C:
			return true
		case <-d.ctx.Done():
			return false
		case <-changed:
		}
	}
}

func hasTarget(r *schemas.NotificationRule, target string) bool {
	switch target {
	case targetWebhook:
		return r.Spec.Webhook != nil
	case targetSubject:
		return r.Spec.Subject != ""
	case targetEmail:
		return r.Spec.Email != nil
	}
	return false
}

// attempt makes one delivery attempt, within the concurrency bounds.
func (d *Dispatcher) attempt(t *task, r *schemas.NotificationRule, n int) error {
	release, err := d.acquire(t.ev.workspace)
	if err != nil {
		return err
	}
	defer release()
	switch t.target {
	case targetWebhook:
		return d.post(t, r, n)
	case targetEmail:
		return d.sendMail(t, r)
	}
	return d.forward(t, r)
}

// acquire takes a delivery slot of the workspace, then one of the dispatcher.
func (d *Dispatcher) acquire(ws string) (release func(), err error) {
	d.mu.Lock()
	s := d.wsSlots[ws]
	if s == nil {
		s = make(chan struct{}, d.o.WorkspaceConcurrency)
		d.wsSlots[ws] = s
	}
	d.mu.Unlock()
	select {
	case s <- struct{}{}:
	case <-d.ctx.Done():
		return nil, d.ctx.Err()
	}
	select {
	case d.global <- struct{}{}:
	case <-d.ctx.Done():
		<-s
		return nil, d.ctx.Err()
	}
	return func() { <-d.global; <-s }, nil
}

// post sends the event to the rule's webhook, in the webhook's format.
func (d *Dispatcher) post(t *task, r *schemas.NotificationRule, n int) error {
	w := r.Spec.Webhook
	secret, err := d.secret(t.ev.workspace, "secretRef", w.Secret, w.SecretRef)
	if err != nil {
		return err
	}
	var botSecret []byte
	if w.BotSecret != "" || w.BotSecretRef != nil {
		if botSecret, err = d.secret(t.ev.workspace, "botSecretRef", w.BotSecret, w.BotSecretRef); err != nil {
			return err
		}
	}
	out, err := d.render(t.ev, w, botSecret, time.Now())
	if err != nil {
		return err
	}
	timeout := w.Timeout.D()
	if timeout <= 0 {
		timeout = schemas.DefaultWebhookTimeout.D()
	}
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, out.url, bytes.NewReader(out.body))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	for k, v := range w.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", out.contentType)
	req.Header.Set(HeaderSignature, Sign(secret, out.body))
	req.Header.Set(HeaderEventID, t.ev.id)
	req.Header.Set(HeaderAttempt, strconv.Itoa(n))
	req.Header.Set(HeaderRule, t.ev.workspace+"/"+t.rule)
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)) // read, so the connection is reused
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return httpStatusError{resp.StatusCode}
	}
	return platformError(w.Format, answer)
}

// platformError reads the answer of a chat platform that reports failures in a 200
// answer's body: DingTalk and WeCom {"errcode": n}, Feishu {"code": n} (or
// {"StatusCode": n}); n != 0 is a failed attempt. Only the code is kept, as for an HTTP
// status.
func platformError(f schemas.WebhookFormat, answer []byte) error {
	if f != schemas.FormatDingTalk && f != schemas.FormatWeCom && f != schemas.FormatFeishu {
		return nil
	}
	var a struct {
		ErrCode    *int64 `json:"errcode"`
		Code       *int64 `json:"code"`
		StatusCode *int64 `json:"StatusCode"`
	}
	if !json.Valid(answer) || json.Unmarshal(answer, &a) != nil {
		// Not a JSON object: the 2xx status is all there is.
		return nil //nolint:nilerr // an answer the platform does not document is not a failure
	}
	for _, c := range []*int64{a.ErrCode, a.Code, a.StatusCode} {
		if c != nil && *c != 0 {
			return fmt.Errorf("%s answered error code %d", f, *c)
		}
	}
	return nil
}

// secret returns a key given inline or by reference; field names the reference in
// errors.
func (d *Dispatcher) secret(ws, field, inline string, ref *schemas.SecretRef) ([]byte, error) {
	if ref == nil {
		return []byte(inline), nil
	}
	if d.o.Secrets == nil {
		return nil, fmt.Errorf("%s %q: no secret source is configured", field, ref.Name)
	}
	ctx, cancel := context.WithTimeout(d.ctx, publishTimeout)
	defer cancel()
	key, err := d.o.Secrets.Secret(ctx, ws, *ref)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, ref.Name, err)
	}
	return key, nil
}

// forward publishes the event on the rule's subject, with Nats-Msg-Id "<event id>:<rule>"
// so that a stream holding the subject drops a repeat. A subject no stream holds gets a
// plain NATS message, seen by the subscribers of the moment.
func (d *Dispatcher) forward(t *task, r *schemas.NotificationRule) error {
	ctx, cancel := context.WithTimeout(d.ctx, publishTimeout)
	defer cancel()
	m := nats.NewMsg(r.Spec.Subject)
	m.Data = t.ev.raw
	m.Header.Set("Content-Type", ContentType)
	m.Header.Set(HeaderEventID, t.ev.id)
	m.Header.Set(HeaderRule, t.ev.workspace+"/"+t.rule)
	id := t.ev.id + ":" + t.rule
	_, err := d.js.StreamNameBySubject(ctx, m.Subject)
	switch {
	case err == nil:
		_, err = d.js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		return err
	case errors.Is(err, jetstream.ErrStreamNotFound):
		m.Header.Set(jetstream.MsgIDHeader, id)
		nc := d.js.Conn()
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		return nc.FlushWithContext(ctx)
	default:
		return err
	}
}

// deadLetter publishes a failed delivery to the rule's dead-letter subject, retrying
// until it is stored. It reports false when the dispatcher abandons it first.
func (d *Dispatcher) deadLetter(t *task, r *schemas.NotificationRule, attempts int, first time.Time, last error) bool {
	dest := r.Spec.Subject
	switch t.target {
	case targetWebhook:
		dest = r.Spec.Webhook.URL
	case targetEmail:
		dest = strings.Join(append(append([]string(nil), r.Spec.Email.To...), r.Spec.Email.Cc...), ", ")
	}
	dl := DeadLetter{
		Event:          t.ev.raw,
		EventID:        t.ev.id,
		StreamSequence: t.ev.seq,
		Workspace:      t.ev.workspace,
		Rule:           t.rule,
		Target:         t.target,
		Destination:    dest,
		Attempts:       attempts,
		Error:          deadLetterReason(last),
		FirstAttempt:   first.UTC(),
		LastAttempt:    time.Now().UTC(),
	}
	if se := (httpStatusError{}); errors.As(last, &se) {
		dl.Status = se.code
	}
	data, err := json.Marshal(dl)
	if err != nil {
		// The event was read as JSON, so this cannot happen; keep the event anyway.
		d.log.Error("encoding a dead letter", "error", err)
		return true
	}
	subject := r.Spec.DeadLetterSubject
	if subject == "" {
		subject = schemas.DefaultDeadLetterSubject(t.ev.workspace)
	}
	id := fmt.Sprintf("%s:%s:%s:deadletter", t.ev.id, t.rule, t.target)
	if t.redrive != 0 {
		// A redrive that fails again writes a dead letter of its own.
		id += ":redrive:" + strconv.FormatUint(t.redrive, 10)
	}
	backoff := 100 * time.Millisecond
	for {
		m := nats.NewMsg(subject)
		m.Data = data
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set(HeaderEventID, t.ev.id)
		m.Header.Set(HeaderRule, t.ev.workspace+"/"+t.rule)
		ctx, cancel := context.WithTimeout(d.ctx, publishTimeout)
		_, err := d.js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			d.o.Metrics.NotificationDeadLetter(t.target)
			d.log.Warn("delivery dead-lettered", "workspace", t.ev.workspace, "rule", t.rule, "target", t.target,
				"event", t.ev.id, "attempts", attempts, "error", last, "subject", subject)
			return true
		}
		if d.ctx.Err() != nil {
			return false
		}
		d.log.Error("publishing a dead letter", "subject", subject, "event", t.ev.id, "error", err)
		if !sleepCtx(d.ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
