package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
)

// AlertsBucket keeps the state of every alert rule about every running job, keyed
// "<workspace>.<rule>.<job>" (events/jetstream.EnsureStreams declares it).
const AlertsBucket = dlcjs.AlertsBucket

// alertTick is how often absent metrics are checked.
const alertTick = 500 * time.Millisecond

// Alert resolution reasons (events.AlertData.Reason).
const (
	alertRecovered   = "Recovered"
	alertJobEnded    = "JobEnded"
	alertRuleChanged = "RuleChanged"
)

// alerter evaluates the alert rules (spec.alert) of every workspace on the job phase,
// metric and resource events the dispatcher reads, and on a timer for absent metrics.
// It publishes an opendlc.alert.v1 event when an alert fires and when it resolves; the
// dispatcher then delivers that event to the rule's targets like any other event.
//
// What it knows of each (rule, job) is kept in AlertsBucket, written after the alert
// event it implies is published: the event's id is derived from the rule, the job and
// the time the condition started to hold, so an evaluator that restarts between the two
// publishes the same id again, which JetStream drops within its duplicate window. An
// event read again after a restart is not applied twice: the state records the stream
// sequence of the last event that changed it.
type alerter struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	// rules returns the alert rules of a workspace, by name.
	rules func(ws string) map[string]*ruleEntry
	// now is the clock of absent checks.
	now func() time.Time
	log *slog.Logger

	// caughtUp reports whether every event of the workspace published so far has been
	// observed (or seen); an absent metric fires only then.
	caughtUp func(ctx context.Context, ws string) bool

	mu  sync.Mutex
	wss map[string]*wsAlerts

	seenMu sync.Mutex
	seen   map[string]uint64 // workspace -> the newest stream sequence observed
}

// saw records that the workspace's events up to seq have been observed.
func (a *alerter) saw(ws string, seq uint64) {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	a.seen[ws] = max(a.seen[ws], seq)
}

// seenUpTo is the newest stream sequence of the workspace observed.
func (a *alerter) seenUpTo(ws string) uint64 {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	return a.seen[ws]
}

// wsAlerts is what the alerter knows of one workspace: its jobs' phases and its alerts.
type wsAlerts struct {
	jobs   map[string]*alertJob
	states map[alertKey]*alertState
}

type alertKey struct{ rule, job string }

// alertJob is a job's phase as its latest status event says.
type alertJob struct {
	phase  string
	labels map[string]string
	// running is when the job last became Running.
	running time.Time
	// seq is the stream sequence of the status event read last.
	seq uint64
}

// alertState is one rule's alert about one job, as stored in AlertsBucket.
type alertState struct {
	// Condition is the rule's condition that the state was computed for; a rule whose
	// condition changed starts again.
	Condition string `json:"condition"`
	// Seq is the DLC_EVENTS sequence of the last event that changed the state.
	Seq uint64 `json:"seq,omitempty"`
	// Holding is the time of the first sample of the current run of samples that meet
	// an above or below condition; zero when the last sample did not.
	Holding time.Time `json:"holding,omitzero"`
	// LastSample is the time of the newest sample of the metric (absentFor).
	LastSample time.Time `json:"lastSample,omitzero"`
	// Firing is set while the alert fires; Since is the time its condition started to
	// hold.
	Firing bool      `json:"firing,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Value is the sample that fired the alert.
	Value *float64 `json:"value,omitempty"`
	// stored: the state is in the bucket; saved is the LastSample stored.
	stored bool
	saved  time.Time
}

// sampleWriteEvery is how far the last sample's time of an absentFor alert moves before
// it is stored again, at most: a job that reports many times a second costs a few
// writes a second. A restart can so take the metric for absent this much early.
func sampleWriteEvery(a *schemas.NotificationAlert) time.Duration {
	return min(time.Second, a.AbsentFor.D()/10)
}

func newAlerter(js jetstream.JetStream, stream jetstream.Stream, kv jetstream.KeyValue, rules func(string) map[string]*ruleEntry,
	log *slog.Logger) *alerter {
	return &alerter{js: js, stream: stream, kv: kv, rules: rules, now: time.Now, log: log, wss: map[string]*wsAlerts{},
		seen: map[string]uint64{}, caughtUp: func(context.Context, string) bool { return true }}
}

// holds reports whether v meets an above or below condition.
func holds(a *schemas.NotificationAlert, v float64) bool {
	switch {
	case math.IsNaN(v):
		return false
	case a.Above != nil:
		return v > *a.Above
	case a.Below != nil:
		return v < *a.Below
	}
	return false
}

// alertRules returns the workspace's rules that have an alert, by name.
func (d *Dispatcher) alertRules(ws string) map[string]*ruleEntry {
	d.rmu.RLock()
	defer d.rmu.RUnlock()
	var out map[string]*ruleEntry
	for n, e := range d.rules[ws] {
		if e.rule.Spec.Alert != nil {
			if out == nil {
				out = map[string]*ruleEntry{}
			}
			out[n] = e
		}
	}
	return out
}

// observe applies one event of DLC_EVENTS to the workspace's alerts, publishing the
// alert events it implies. It returns an error when NATS failed; the event must then
// be observed again.
func (a *alerter) observe(ctx context.Context, ev *event) error {
	switch ev.env.Type {
	case events.TypeJobPhase, events.TypeJobMetric, events.TypeJobResources:
	default:
		return nil
	}
	rules := a.rules(ev.workspace)
	if len(rules) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w, err := a.workspace(ctx, ev.workspace)
	if err != nil {
		return err
	}
	if ev.env.Type == events.TypeJobPhase {
		return a.phase(ctx, ev, w, rules)
	}
	job := w.jobs[ev.data.Job]
	if job == nil || job.phase != string(schemas.JobRunning) {
		return nil // a late sample of a job that is no longer running
	}
	var values map[string]float64
	if ev.env.Type == events.TypeJobMetric {
		var d events.MetricData
		if err := json.Unmarshal(ev.env.Data, &d); err != nil {
			return nil //nolint:nilerr // a malformed sample is not evaluated
		}
		values = d.Values
	} else {
		var d events.ResourceData
		if err := json.Unmarshal(ev.env.Data, &d); err != nil {
			return nil //nolint:nilerr // a malformed sample is not evaluated
		}
		values = d.ResourceMetrics()
	}
	t := ev.env.Time
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		e := rules[name]
		al := e.rule.Spec.Alert
		v, ok := values[al.Metric]
		if !ok || t.Before(e.created) || !e.rule.Spec.Match.Matches(jobFacts(ev.data.Job, job)) {
			continue
		}
		st, err := a.state(ctx, ev.workspace, w, name, ev.data.Job, al)
		if err != nil {
			return err
		}
		if ev.seq != 0 && ev.seq <= st.Seq {
			continue // applied before a restart
		}
		next := *st
		var out *events.AlertData
		if al.AbsentFor != 0 {
			if t.After(next.LastSample) {
				next.LastSample = t
			}
			if next.Firing {
				out = resolved(name, ev.data.Job, job, al, &next, &v, alertRecovered)
			}
		} else if holds(al, v) {
			if next.Holding.IsZero() {
				next.Holding = t
			}
			if !next.Firing && t.Sub(next.Holding) >= al.For.D() {
				next.Firing, next.Since, next.Value = true, next.Holding, &v
				out = firing(name, ev.data.Job, job, al, &next)
			}
		} else {
			next.Holding = time.Time{}
			if next.Firing {
				out = resolved(name, ev.data.Job, job, al, &next, &v, alertRecovered)
			}
		}
		if sameState(st, &next) {
			continue
		}
		if onlySampleMoved(st, &next) && next.LastSample.Sub(st.saved) < sampleWriteEvery(al) {
			// Only the last sample's time moved, a little: kept in memory.
			w.states[alertKey{name, ev.data.Job}] = &next
			continue
		}
		next.Seq = ev.seq
		if err := a.commit(ctx, ev.workspace, w, name, ev.data.Job, &next, out, t); err != nil {
			return err
		}
	}
	return nil
}

// phase applies a job's phase event: a job that leaves Running resolves its alerts.
func (a *alerter) phase(ctx context.Context, ev *event, w *wsAlerts, rules map[string]*ruleEntry) error {
	var d events.JobPhaseData
	if err := json.Unmarshal(ev.env.Data, &d); err != nil || d.Job == "" {
		return nil //nolint:nilerr // not a phase event the alerts can use
	}
	job := w.jobs[d.Job]
	if job == nil {
		job = &alertJob{}
		w.jobs[d.Job] = job
	}
	if ev.seq != 0 && ev.seq < job.seq {
		return nil // older than what the workspace's last status says
	}
	was := job.phase
	job.phase, job.labels, job.seq = d.Phase, d.Labels, ev.seq
	if d.Phase == string(schemas.JobRunning) {
		if was != d.Phase || job.running.IsZero() {
			job.running = ev.env.Time
		}
		return nil
	}
	return a.endJob(ctx, ev.workspace, w, d.Job, job, rules, alertJobEnded, ev.env.Time)
}

// endJob resolves every firing alert of a job and forgets its states.
func (a *alerter) endJob(ctx context.Context, ws string, w *wsAlerts, jobName string, job *alertJob,
	rules map[string]*ruleEntry, reason string, t time.Time) error {
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		al := rules[name].rule.Spec.Alert
		st, err := a.state(ctx, ws, w, name, jobName, al)
		if err != nil {
			return err
		}
		if st.Firing {
			next := *st
			out := resolved(name, jobName, job, al, &next, nil, reason)
			if err := a.commit(ctx, ws, w, name, jobName, &next, out, t); err != nil {
				return err
			}
		}
		if err := a.forget(ctx, ws, w, name, jobName); err != nil {
			return err
		}
	}
	return nil
}

// sweep deletes the stored states of the rules that are not in live ("<workspace>.<rule>"),
// once at start and again whenever the set of alert rules changes: those of rules
// deleted while no dispatcher ran, or before it had loaded their states.
func (a *alerter) sweep(ctx context.Context, live map[string]bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lister, err := a.kv.ListKeys(lctx)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", AlertsBucket, err)
	}
	var stale []string
	for k := range lister.Keys() {
		parts := strings.SplitN(k, ".", 3)
		if len(parts) == 3 && !live[parts[0]+"."+parts[1]] {
			stale = append(stale, k)
		}
	}
	if err := lctx.Err(); err != nil {
		return fmt.Errorf("bucket %s: %w", AlertsBucket, err)
	}
	for _, k := range stale {
		if err := a.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("bucket %s: %w", AlertsBucket, err)
		}
		parts := strings.SplitN(k, ".", 3)
		if w := a.wss[parts[0]]; w != nil {
			delete(w.states, alertKey{parts[1], parts[2]})
		}
	}
	return nil
}

// tick checks the absent metrics of every running job of every workspace with alert
// rules, and forgets the states of deleted rules.
func (a *alerter) tick(ctx context.Context, workspaces []string) {
	for _, ws := range workspaces {
		rules := a.rules(ws)
		if err := a.tickWorkspace(ctx, ws, rules); err != nil && ctx.Err() == nil {
			a.log.Error("checking absent metrics; retrying", "workspace", ws, "error", err)
		}
	}
}

func (a *alerter) tickWorkspace(ctx context.Context, ws string, rules map[string]*ruleEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(rules) == 0 {
		w := a.wss[ws]
		delete(a.wss, ws)
		if w != nil {
			for k := range w.states {
				if err := a.forget(ctx, ws, w, k.rule, k.job); err != nil {
					return err
				}
			}
		}
		return nil
	}
	w, err := a.workspace(ctx, ws)
	if err != nil {
		return err
	}
	for k := range w.states {
		if _, ok := rules[k.rule]; !ok {
			if err := a.forget(ctx, ws, w, k.rule, k.job); err != nil {
				return err
			}
		}
	}
	now := a.now()
	var caughtUp *bool // asked once, when an absent alert is due
	var running []string
	for name, job := range w.jobs {
		if job.phase == string(schemas.JobRunning) {
			running = append(running, name)
		}
	}
	slices.Sort(running)
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		e := rules[name]
		al := e.rule.Spec.Alert
		if al.AbsentFor == 0 {
			continue
		}
		for _, jobName := range running {
			job := w.jobs[jobName]
			if !e.rule.Spec.Match.Matches(jobFacts(jobName, job)) {
				continue
			}
			st, err := a.state(ctx, ws, w, name, jobName, al)
			if err != nil {
				return err
			}
			if st.Firing {
				continue
			}
			base := latest(st.LastSample, job.running, e.created)
			if now.Sub(base) < al.AbsentFor.D() {
				continue
			}
			if caughtUp == nil {
				caughtUp = new(a.caughtUp(ctx, ws))
			}
			if !*caughtUp {
				// The workspace's events are not all read yet (a backlog after a
				// restart): the sample may be among them.
				continue
			}
			if !st.LastSample.Equal(st.saved) {
				// Store the newest sample's time first: the alert's id derives from it, and
				// a dispatcher that dies after publishing must derive the same.
				if err := a.commit(ctx, ws, w, name, jobName, st, nil, now); err != nil {
					return err
				}
			}
			next := *st
			next.Firing, next.Since = true, base
			out := firing(name, jobName, job, al, &next)
			if err := a.commit(ctx, ws, w, name, jobName, &next, out, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

func jobFacts(name string, job *alertJob) schemas.EventFacts {
	return schemas.EventFacts{Type: events.TypeJobPhase, Job: name, Phase: job.phase, Labels: job.labels}
}

// onlySampleMoved reports whether b differs from a in LastSample only.
func onlySampleMoved(a, b *alertState) bool {
	return a.Condition == b.Condition && a.Holding.Equal(b.Holding) && a.Firing == b.Firing && a.Since.Equal(b.Since) &&
		!a.LastSample.Equal(b.LastSample)
}

func sameState(a, b *alertState) bool {
	return a.Condition == b.Condition && a.Holding.Equal(b.Holding) && a.LastSample.Equal(b.LastSample) &&
		a.Firing == b.Firing && a.Since.Equal(b.Since)
}

func firing(rule, jobName string, job *alertJob, al *schemas.NotificationAlert, st *alertState) *events.AlertData {
	return alertData(rule, jobName, job, al, st, events.AlertFiring, st.Value, "")
}

// resolved ends st's firing and returns the resolved event's data.
func resolved(rule, jobName string, job *alertJob, al *schemas.NotificationAlert, st *alertState, v *float64, reason string) *events.AlertData {
	d := alertData(rule, jobName, job, al, st, events.AlertResolved, v, reason)
	st.Firing, st.Value = false, nil
	return d
}

func alertData(rule, jobName string, job *alertJob, al *schemas.NotificationAlert, st *alertState, state string, v *float64, reason string) *events.AlertData {
	d := &events.AlertData{Rule: rule, Job: jobName, Metric: al.Metric, State: state, Condition: al.Condition(),
		Since: st.Since.UTC(), Reason: reason, Labels: job.labels}
	if v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
		x := *v
		d.Value = &x
	}
	switch {
	case al.Above != nil:
		d.Threshold = al.Above
	case al.Below != nil:
		d.Threshold = al.Below
	}
	d.Message = al.Metric + " " + d.Condition
	if d.Value != nil {
		d.Message += " (last " + strconv.FormatFloat(*d.Value, 'g', 6, 64) + ")"
	}
	switch {
	case state == events.AlertFiring:
		d.Message += " since " + d.Since.Format(time.RFC3339)
	case reason == alertJobEnded:
		d.Message += ": resolved, the job is no longer running"
	case reason == alertRuleChanged:
		d.Message += ": resolved, the rule changed"
	default:
		d.Message += ": resolved"
	}
	return d
}

// alertEventID is the deterministic id of an alert event: one per rule, job, episode
// (the time its condition started to hold) and state.
func alertEventID(ws string, d *events.AlertData) string {
	return fmt.Sprintf("alert:%s:%s:%s:%d:%s", ws, d.Rule, d.Job, d.Since.UnixNano(), d.State)
}

// commit publishes out (when set), then stores st.
func (a *alerter) commit(ctx context.Context, ws string, w *wsAlerts, rule, job string, st *alertState,
	out *events.AlertData, t time.Time) error {
	if out != nil {
		id := alertEventID(ws, out)
		e, err := events.New(id, events.TypeAlert, ws, events.AlertSource(ws, rule), job, t, out)
		if err != nil {
			return err
		}
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		_, err = a.js.Publish(pctx, events.AlertSubject(ws, rule), data, jetstream.WithMsgID(id))
		cancel()
		if err != nil {
			return fmt.Errorf("publish alert %s: %w", id, err)
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := a.kv.Put(ctx, alertStateKey(ws, rule, job), b); err != nil {
		return fmt.Errorf("bucket %s: %w", AlertsBucket, err)
	}
	st.stored, st.saved = true, st.LastSample
	w.states[alertKey{rule, job}] = st
	return nil
}

func (a *alerter) forget(ctx context.Context, ws string, w *wsAlerts, rule, job string) error {
	if st := w.states[alertKey{rule, job}]; st == nil || !st.stored {
		delete(w.states, alertKey{rule, job})
		return nil
	}
	if err := a.kv.Delete(ctx, alertStateKey(ws, rule, job)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("bucket %s: %w", AlertsBucket, err)
	}
	delete(w.states, alertKey{rule, job})
	return nil
}

func alertStateKey(ws, rule, job string) string { return ws + "." + rule + "." + job }

// state returns the stored state of a rule's alert about a job. When the rule's
// condition changed since, the old alert resolves and the state starts again.
func (a *alerter) state(ctx context.Context, ws string, w *wsAlerts, rule, jobName string, al *schemas.NotificationAlert) (*alertState, error) {
	k := alertKey{rule, jobName}
	st := w.states[k]
	if st == nil {
		st = &alertState{}
		e, err := a.kv.Get(ctx, alertStateKey(ws, rule, jobName))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			st.Condition = al.Condition()
		case err != nil:
			return nil, fmt.Errorf("bucket %s: %w", AlertsBucket, err)
		default:
			if err := json.Unmarshal(e.Value(), st); err != nil {
				st = &alertState{Condition: al.Condition()}
			}
			st.stored, st.saved = true, st.LastSample
		}
		w.states[k] = st
	}
	if c := al.Condition(); st.Condition != c {
		next := &alertState{Condition: c, Seq: st.Seq, stored: st.stored}
		if st.Firing {
			old := *st
			job := w.jobs[jobName]
			if job == nil {
				job = &alertJob{}
			}
			out := alertData(rule, jobName, job, al, &old, events.AlertResolved, nil, alertRuleChanged)
			out.Metric, out.Condition = "", st.Condition
			out.Message = "the alert's condition changed from " + st.Condition + " to " + c + ": resolved"
			if err := a.commit(ctx, ws, w, rule, jobName, next, out, a.now()); err != nil {
				return nil, err
			}
		} else {
			w.states[k] = next
		}
		st = next
	}
	return st, nil
}

// workspace returns what the alerter knows of ws, reading each job's latest status
// event the first time.
func (a *alerter) workspace(ctx context.Context, ws string) (*wsAlerts, error) {
	if w := a.wss[ws]; w != nil {
		return w, nil
	}
	w := &wsAlerts{jobs: map[string]*alertJob{}, states: map[alertKey]*alertState{}}
	cons, err := a.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{events.JobStatusSubject(ws, "*")},
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: dlcjs.ReadInactive,
	})
	if err != nil {
		return nil, fmt.Errorf("read the jobs' status of workspace %s: %w", ws, err)
	}
	defer dlcjs.ReleaseConsumer(a.js, a.stream.CachedInfo().Config.Name, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the jobs' status of workspace %s: %w", ws, err)
	}
	for left := info.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read the jobs' status of workspace %s: %w", ws, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			a.seed(w, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("read the jobs' status of workspace %s: %w", ws, err)
		}
		if n == 0 {
			break
		}
		left -= uint64(n)
	}
	a.wss[ws] = w
	return w, nil
}

// seed records a job's latest status event.
func (a *alerter) seed(w *wsAlerts, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	var env events.Event
	var d events.JobPhaseData
	if json.Unmarshal(m.Data(), &env) != nil || env.Type != events.TypeJobPhase || json.Unmarshal(env.Data, &d) != nil || d.Job == "" {
		return
	}
	job := &alertJob{phase: d.Phase, labels: d.Labels, seq: md.Sequence.Stream}
	if d.Phase == string(schemas.JobRunning) {
		job.running = env.Time
	}
	w.jobs[d.Job] = job
}
