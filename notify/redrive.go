package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
)

// RedriveBucket records the dead letters queued for redelivery, keyed
// "<workspace>.<rule>.<DLC_NOTIFY sequence>"; events/jetstream.EnsureStreams declares
// it.
const RedriveBucket = dlcjs.NotifyRedriveBucket

// MaxRedrive bounds the dead letters one redrive queues.
const MaxRedrive = 1000

// redriveReadTimeout bounds the wait for the next dead letter of a redrive's scan.
const redriveReadTimeout = 5 * time.Second

// Redrive states, in a RedriveBucket entry.
const (
	redriveQueued = "queued"
	redriveDone   = "done"
)

// ErrInvalidRedrive is returned for a redrive request with a bad limit or time.
var ErrInvalidRedrive = errors.New("notify: invalid redrive request")

// redriveRecord is the value of a RedriveBucket entry.
type redriveRecord struct {
	State    string    `json:"state"`
	QueuedAt time.Time `json:"queuedAt"`
	// Outcome, once done: delivered (or dead-lettered again), dropped (the rule or its
	// target is gone), expired (the dead letter or its event is no longer kept) or
	// refused (the dead letter does not match its event).
	Outcome string    `json:"outcome,omitempty"`
	DoneAt  time.Time `json:"doneAt,omitzero"`
}

// Redriver queues a rule's dead letters for delivery again (Redrive). A running
// Dispatcher delivers what is queued, each dead letter once.
type Redriver struct {
	js    jetstream.JetStream
	rules *Store
	kv    jetstream.KeyValue
}

// OpenRedriver opens the redrive bucket, which events/jetstream.EnsureStreams creates.
func OpenRedriver(ctx context.Context, js jetstream.JetStream, rules *Store) (*Redriver, error) {
	kv, err := js.KeyValue(ctx, RedriveBucket)
	if err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by jetstream.EnsureStreams): %w", RedriveBucket, err)
	}
	return &Redriver{js: js, rules: rules, kv: kv}, nil
}

// redriveKey is the RedriveBucket key of the dead letter at seq of a rule.
func redriveKey(ws, rule string, seq uint64) string {
	return ws + "." + rule + "." + strconv.FormatUint(seq, 10)
}

// Redrive queues the rule's dead letters, from its dead-letter subject in DLC_NOTIFY,
// oldest first: at most limit (0: MaxRedrive) of them, written at or after since (zero:
// all). A dead letter is queued at most once, whatever the number of redrives, so a
// redrive that is repeated or that stopped midway queues only what is left. The rule
// must exist; only its own dead letters (those naming it and its workspace) are
// queued.
func (r *Redriver) Redrive(ctx context.Context, ws, name string, limit int, since time.Time) (*api.RedriveResult, error) {
	if limit < 0 || limit > MaxRedrive {
		return nil, fmt.Errorf("%w: limit %d: must be from 1 to %d", ErrInvalidRedrive, limit, MaxRedrive)
	}
	if limit == 0 {
		limit = MaxRedrive
	}
	rule, err := r.rules.Get(ctx, ws, name)
	if err != nil {
		return nil, err
	}
	subject := rule.Spec.DeadLetterSubject
	if subject == "" {
		subject = schemas.DefaultDeadLetterSubject(ws)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: dlcjs.ReadInactive}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := r.js.OrderedConsumer(ctx, NotifyStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("notify: read %s: %w", NotifyStream, err)
	}
	defer dlcjs.ReleaseConsumer(r.js, NotifyStream, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("notify: read %s: %w", NotifyStream, err)
	}
	res := &api.RedriveResult{Queued: []uint64{}}
	pending := info.NumPending
	for pending > 0 {
		if len(res.Queued) == limit {
			res.More = true
			break
		}
		nextCtx, cancel := context.WithTimeout(ctx, redriveReadTimeout)
		m, err := cons.Next(jetstream.FetchContext(nextCtx))
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// The dead letters counted at the start went meanwhile (the stream's
				// limits): what is queued stays queued; a later redrive sees the rest.
				res.More = true
				break
			}
			return nil, fmt.Errorf("notify: read %s: %w", NotifyStream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("notify: read %s: %w", NotifyStream, err)
		}
		pending = md.NumPending
		var dl DeadLetter
		if json.Unmarshal(m.Data(), &dl) != nil || dl.Workspace != ws || dl.Rule != name {
			continue // another rule's, or not a dead letter
		}
		rec, _ := json.Marshal(redriveRecord{State: redriveQueued, QueuedAt: time.Now().UTC()})
		_, err = r.kv.Create(ctx, redriveKey(ws, name, md.Sequence.Stream), rec)
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			res.AlreadyQueued++
		case err != nil:
			return nil, fmt.Errorf("notify: queue dead letter #%d: %w", md.Sequence.Stream, err)
		default:
			res.Queued = append(res.Queued, md.Sequence.Stream)
		}
	}
	return res, nil
}

// watchRedrive delivers the dead letters queued in the redrive bucket, each in a
// goroutine of its own (the concurrency bounds of deliveries apply), until ctx ends.
func (d *Dispatcher) watchRedrive(ctx context.Context, watcher jetstream.KeyWatcher) {
	defer close(d.redriveDone)
	defer func() {
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
				_ = watcher.Stop()
				if watcher = dlcjs.Rewatch(ctx, d.redriveKV, d.log, "redrives"); watcher == nil {
					return
				}
				continue
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec redriveRecord
			if json.Unmarshal(e.Value(), &rec) != nil || rec.State != redriveQueued {
				continue
			}
			d.mu.Lock()
			busy := d.redriving[e.Key()]
			if !busy {
				d.redriving[e.Key()] = true
				d.lanesWG.Add(1)
			}
			d.mu.Unlock()
			if !busy {
				go d.redrive(e.Key(), e.Revision(), rec)
			}
		}
	}
}

// redrive delivers one queued dead letter again, through the rule's current target
// and delivery policy, and marks it done. The event delivered is read from DLC_EVENTS at
// the dead letter's sequence and must be the one the dead letter names, so that what
// is delivered (and signed) is always an event the workspace published.
func (d *Dispatcher) redrive(key string, rev uint64, rec redriveRecord) {
	defer d.lanesWG.Done()
	defer func() {
		d.mu.Lock()
		delete(d.redriving, key)
		d.mu.Unlock()
	}()
	outcome, ok := d.redriveOne(key)
	if !ok {
		return // abandoned: left queued, delivered by the next dispatcher
	}
	rec.State, rec.Outcome, rec.DoneAt = redriveDone, outcome, time.Now().UTC()
	data, _ := json.Marshal(rec)
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if _, err := d.redriveKV.Update(ctx, key, data, rev); err != nil {
		d.log.Warn("marking a redriven dead letter done", "key", key, "error", err)
	}
}

// redriveOne delivers the dead letter of key and says how it went; false when the
// dispatcher abandoned it.
func (d *Dispatcher) redriveOne(key string) (outcome string, ok bool) {
	tokens := strings.Split(key, ".")
	seq, err := strconv.ParseUint(tokens[len(tokens)-1], 10, 64)
	if len(tokens) != 3 || err != nil || !dnsLabelRE.MatchString(tokens[0]) || !dnsLabelRE.MatchString(tokens[1]) {
		d.log.Error("ignoring a redrive key that is not <workspace>.<rule>.<sequence>", "key", key)
		return "refused", true
	}
	ws, rule := tokens[0], tokens[1]
	ctx, cancel := context.WithTimeout(d.ctx, publishTimeout)
	defer cancel()
	m, err := d.notifyStream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "expired", true
	}
	if err != nil {
		d.log.Warn("reading a dead letter to redrive; retried at the next start", "key", key, "error", err)
		return "", false
	}
	var dl DeadLetter
	if !strings.HasPrefix(m.Subject, schemas.NotifySubjectPrefix(ws)) || json.Unmarshal(m.Data, &dl) != nil ||
		dl.Workspace != ws || dl.Rule != rule || !hasTargetName(dl.Target) {
		return "refused", true
	}
	em, err := d.stream.GetMsg(ctx, dl.StreamSequence)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "expired", true
	}
	if err != nil {
		d.log.Warn("reading the event of a dead letter; retried at the next start", "key", key, "error", err)
		return "", false
	}
	ev, err := parseEvent(em.Subject, em.Data)
	if err != nil || ev.workspace != ws || ev.id != dl.EventID {
		d.log.Error("refusing to redrive a dead letter that does not match its event", "key", key, "event", dl.EventID)
		return "refused", true
	}
	ev.seq = dl.StreamSequence
	t := &task{ev: ev, rule: rule, target: dl.Target, p: &pending{w: &worker{}}, redrive: seq}
	if e := d.ruleEntry(ws, rule); e == nil || !hasTarget(e.rule, t.target) {
		return "dropped", true
	}
	if !d.deliver(t) {
		return "", false
	}
	d.log.Info("dead letter redriven", "workspace", ws, "rule", rule, "target", t.target, "event", ev.id, "deadLetter", seq)
	return "delivered", true
}

func hasTargetName(t string) bool {
	return t == targetWebhook || t == targetEmail || t == targetSubject
}
