package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/schemas"
)

// Publisher sends messages to the event streams. Publish must be idempotent for equal
// message ids (JetStream deduplicates on Nats-Msg-Id).
type Publisher interface {
	Publish(ctx context.Context, msgs ...events.Msg) error
	// LastMsg returns the newest message on subject in stream, nil if none.
	LastMsg(ctx context.Context, stream, subject string) ([]byte, error)
}

// CheckpointFinder finds a job's newest complete checkpoint.
type CheckpointFinder interface {
	// Latest returns the ref (s3://bucket/prefix/<step>) of the newest complete
	// checkpoint under uri, or "" when there is none.
	Latest(ctx context.Context, uri string) (string, error)
}

// JobActivities are the activities of the TrainingJob workflow. They hold the clients
// and are safe for concurrent use; workflows refer to them by the names in
// workflows/names.go.
type JobActivities struct {
	Backend     backend.Backend
	Publisher   Publisher
	Checkpoints CheckpointFinder
	// Workspaces is the workspace registry (ResolveWorkspace); nil, every workspace
	// has the zero configuration.
	Workspaces WorkspaceRegistry
	// Storage, when set, confines a job's S3 URIs and its checkpoint pruning to its
	// workspace's locations (storage.go); nil checks nothing.
	Storage StorageLocations
	// LogStream is the JetStream stream holding log records, used to find where a
	// restarted forwarder resumes.
	LogStream string
	// Events reads the metric events back (EventStream, jetstream.EventsStream), to
	// find where a restarted metrics file tail resumes (metric_files.go).
	Events      EventReader
	EventStream string
	// MetricObjects reads the metrics files with s3:// paths; nil reads none.
	MetricObjects MetricObjects
	// MetricFilePoll is how often a metrics file is read while its replica runs.
	// Default DefaultMetricFilePoll.
	MetricFilePoll time.Duration
	// PollInterval is how often WatchGang observes the backend. Default 200ms.
	PollInterval time.Duration
	// WatchCoalesce is how long WatchGang holds a change that is only progress of a
	// gang coming up (watch_coalesce.go), to answer with the changes that follow it in
	// one result. Default DefaultWatchCoalesce; negative: every change at once.
	WatchCoalesce time.Duration
	// LogBatch is the most log records published in one batch. Default 256.
	LogBatch int
	// LogFlushInterval bounds how long a log line waits for its batch. Default 200ms.
	LogFlushInterval time.Duration
	// Metrics records launches, phase changes and forwarded log lines; nil records
	// nothing.
	Metrics *metrics.Registry
	// HeartbeatBudget is how many heartbeats a second the process's long activities
	// (WatchGang, ForwardLogs) share (heartbeat_pacer.go); default
	// DefaultHeartbeatBudget.
	HeartbeatBudget float64
	// ResourceInterval is how often ForwardLogs samples each replica's resources
	// (resources.go), on a backend that can; default DefaultResourceInterval, at least
	// MinResourceInterval; negative: never.
	ResourceInterval time.Duration
}

func (a *JobActivities) pollInterval() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return 200 * time.Millisecond
}

// PublishEventsInput carries messages to publish, in order.
type PublishEventsInput struct {
	Msgs []events.Msg `json:"msgs"`
}

// PublishEvents publishes status events. Run as a local activity; a retry republishes
// the same ids, which JetStream drops as duplicates.
func (a *JobActivities) PublishEvents(ctx context.Context, in PublishEventsInput) error {
	if err := a.Publisher.Publish(ctx, in.Msgs...); err != nil {
		return err
	}
	a.recordPhases(in.Msgs)
	return nil
}

// LaunchGangInput is the job and the attempt to launch.
type LaunchGangInput struct {
	Job    schemas.TrainingJob `json:"job"`
	Params backend.GangParams  `json:"params"`
}

// LaunchGangResult lists the replicas created.
type LaunchGangResult struct {
	Replicas []schemas.ReplicaStatus `json:"replicas"`
	// PlacementTimeout is the attempt's placement timeout: the job's
	// spec.resources.placementTimeout, else its pool's on the backend, else
	// backend.DefaultPlacementTimeout; zero for none. It is defaulted here, in the
	// activity, because the pool policy is the worker's: the workflow reads it from
	// the recorded result, so replays see the value the attempt ran with.
	PlacementTimeout time.Duration `json:"placementTimeout,omitempty"`
}

// LaunchGang creates every replica of an attempt. It is idempotent: a replica that
// exists already is left alone, so a retry after a worker crash creates nothing twice.
func (a *JobActivities) LaunchGang(ctx context.Context, in LaunchGangInput) (LaunchGangResult, error) {
	defer keepAlive(ctx)()
	gang, err := backend.BuildGang(&in.Job, in.Params)
	if err != nil {
		return LaunchGangResult{}, invalidSpec(err)
	}
	if err := a.checkJobStorage(ctx, &in.Job, in.Params.ResumeFrom); err != nil {
		return LaunchGangResult{}, err
	}
	start := time.Now()
	err = a.Backend.Launch(ctx, gang)
	a.recordLaunch(start, err)
	if err != nil {
		return LaunchGangResult{}, backendError(err, "launch "+gang.ID())
	}
	st, err := a.Backend.Observe(ctx, gang.GangRef)
	if err != nil {
		return LaunchGangResult{}, backendError(err, "observe "+gang.ID())
	}
	pt := in.Job.Spec.Resources.PlacementTimeout.D()
	if pt <= 0 {
		pt = backend.PlacementTimeoutFor(a.Backend, gang.Pool)
	}
	return LaunchGangResult{Replicas: st.Replicas, PlacementTimeout: pt}, nil
}

// WatchGangInput names the gang and the replica states the workflow knows.
type WatchGangInput struct {
	Ref   backend.GangRef         `json:"ref"`
	Known []schemas.ReplicaStatus `json:"known"`
	// MaxWait bounds the call: when nothing changed by then, it returns the current
	// state anyway, so the workflow's history grows slowly during long runs.
	MaxWait time.Duration `json:"maxWait"`
}

// WatchGangResult is the first observed state that differs from the known one.
type WatchGangResult struct {
	Replicas []schemas.ReplicaStatus `json:"replicas"`
}

// WatchGang blocks until a replica's phase, exit code or node differs from what the
// workflow knows (or MaxWait passes), heartbeating while it waits, and returns the
// current state. A change that is only progress of a gang coming up is held for up to
// WatchCoalesce, so that the replicas starting after it come back in the same result
// (decisiveChange says which changes are answered at once).
func (a *JobActivities) WatchGang(ctx context.Context, in WatchGangInput) (WatchGangResult, error) {
	// With a backend that says when a gang changes (the kube backend's shared
	// informers), the watch waits for that and observes on a slow timer only for the
	// time-based rules (pull grace, node-lost grace); otherwise it polls.
	notifier, _ := a.Backend.(backend.ChangeNotifier)
	poll := a.pollInterval()
	if notifier != nil {
		poll = max(poll, watchFallback)
	}
	pacer, done := a.pace(ctx)
	defer done()
	t := time.NewTimer(poll)
	defer t.Stop()
	deadline := time.Now().Add(in.MaxWait)
	var holdUntil time.Time // when a held change is answered; zero: none held
	for {
		var changed <-chan struct{}
		if notifier != nil {
			changed = notifier.GangChanges(in.Ref)
		}
		st, err := a.Backend.Observe(ctx, in.Ref)
		if errors.Is(err, backend.ErrGangNotFound) {
			return WatchGangResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("gang %s is unknown to the %s backend", in.Ref.ID(), a.Backend.Name()), ErrTypeGangLost, err)
		}
		if err != nil {
			return WatchGangResult{}, backendError(err, "observe "+in.Ref.ID())
		}
		now := time.Now()
		if !now.Before(deadline) {
			return WatchGangResult{Replicas: st.Replicas}, nil
		}
		if ReplicasChanged(in.Known, st.Replicas) {
			decisive := decisiveChange(in.Known, st.Replicas)
			if holdUntil.IsZero() {
				holdUntil = now.Add(a.watchCoalesce())
				if decisive && failureUnsettled(st.Replicas) {
					// A replica failed while others run: their ends, caused by it
					// (a collective broken by a killed peer), come within moments.
					// Seen together, the workflow tells the cause from its echoes.
					holdUntil = now.Add(failureSettle)
				}
			}
			if !now.Before(holdUntil) || (decisive && !failureUnsettled(st.Replicas)) {
				return WatchGangResult{Replicas: st.Replicas}, nil
			}
		}
		if pacer.due(now) {
			activity.RecordHeartbeat(ctx)
		}
		wait := min(poll, pacer.wait(now), max(deadline.Sub(now), time.Millisecond))
		if !holdUntil.IsZero() {
			wait = min(wait, max(holdUntil.Sub(now), time.Millisecond))
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return WatchGangResult{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
	}
}

// watchFallback is how often WatchGang observes a gang with no change notified.
const watchFallback = time.Second

// failureSettle is how long WatchGang holds a replica's failure while other replicas
// still run, so that the failures it causes come back with it (with a backend that
// notifies changes at once, the first failure seen may be a peer's echo of it).
const failureSettle = 100 * time.Millisecond

// failureUnsettled reports whether a replica failed while another has not ended and
// no failed replica was ended from outside. A replica killed (a signal, the OOM
// killer, an eviction, its node lost) is a cause that no echo displaces
// (frameworks.Outcome prefers it), so WatchGang answers at once; a replica that only
// exited with an error may be the echo of a peer's end that is not seen yet.
func failureUnsettled(reps []schemas.ReplicaStatus) bool {
	failed, live := false, false
	for _, r := range reps {
		if r.Phase == schemas.ReplicaFailed {
			if r.Reason.EndedFromOutside() {
				return false
			}
			failed = true
		}
		live = live || !r.Phase.Terminal()
	}
	return failed && live
}

// ReplicasChanged reports whether any replica's phase, exit code or node differs.
func ReplicasChanged(old, cur []schemas.ReplicaStatus) bool {
	if len(old) != len(cur) {
		return true
	}
	for i := range old {
		o, c := old[i], cur[i]
		if o.Name != c.Name || o.Phase != c.Phase || o.Node != c.Node || !equalCode(o.ExitCode, c.ExitCode) {
			return true
		}
	}
	return false
}

func equalCode(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// StopGang kills every replica of an attempt.
func (a *JobActivities) StopGang(ctx context.Context, ref backend.GangRef) error {
	defer keepAlive(ctx)()
	return backendError(a.Backend.Stop(ctx, ref), "stop "+ref.ID())
}

// CleanupGang removes what an attempt left behind.
func (a *JobActivities) CleanupGang(ctx context.Context, ref backend.GangRef) error {
	defer keepAlive(ctx)()
	return backendError(a.Backend.Cleanup(ctx, ref), "clean up "+ref.ID())
}

// keepAlive heartbeats every second until the returned func is called, so that an
// activity that does not report progress (creating a large gang, waiting for pods to
// go) still has a short heartbeat timeout: a worker that dies in the middle is noticed
// in seconds, not at the activity's start-to-close timeout.
func keepAlive(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done) }
}

// LatestCheckpointInput names a checkpoint location.
type LatestCheckpointInput struct {
	URI string `json:"uri"`
	// Workspace is the job's workspace: with JobActivities.Storage, a URI outside its
	// locations is not looked at ("" is answered).
	Workspace string `json:"workspace,omitempty"`
}

// LatestCheckpoint returns the newest complete checkpoint under a URI ("" if none).
func (a *JobActivities) LatestCheckpoint(ctx context.Context, in LatestCheckpointInput) (string, error) {
	defer keepAlive(ctx)()
	if a.Checkpoints == nil || in.URI == "" {
		return "", nil
	}
	if ok, err := a.mayRead(ctx, in.Workspace, in.URI); !ok || err != nil {
		return "", err
	}
	return a.Checkpoints.Latest(ctx, in.URI)
}

// ForwardLogsInput names the gang whose logs to forward.
type ForwardLogsInput struct {
	Ref      backend.GangRef         `json:"ref"`
	UID      string                  `json:"uid"`
	Replicas []schemas.ReplicaStatus `json:"replicas"`
	// HangTimeout, when set, ends the forwarding with Hung once every replica runs and
	// none has written a line for this long.
	HangTimeout time.Duration `json:"hangTimeout,omitempty"`
	// LogPatterns are regular expressions (the job's failure rules) whose first match
	// in any replica's output is reported.
	LogPatterns []string `json:"logPatterns,omitempty"`
	// MetricRegexes are the job's stdout collectors' regular expressions
	// (spec.metrics.collectors): their named groups in an output line are metrics.
	MetricRegexes []string `json:"metricRegexes,omitempty"`
	// MetricFiles are the job's file collectors, read for the first of Replicas
	// (metric_files.go), in its working directory WorkingDir (spec.workingDir).
	MetricFiles []schemas.FileCollector `json:"metricFiles,omitempty"`
	WorkingDir  string                  `json:"workingDir,omitempty"`
	// Since is when the attempt started: a metrics file last written before is an
	// earlier run's and is not read.
	Since time.Time `json:"since,omitzero"`
}

// ForwardLogsResult says how the forwarding ended.
type ForwardLogsResult struct {
	// Hung is set when no replica wrote anything for the hang timeout.
	Hung bool `json:"hung,omitempty"`
	// Quiet is how long the replicas had been silent when Hung was decided.
	Quiet time.Duration `json:"quiet,omitempty"`
	// Matches are the log patterns seen, each with the first line that matched.
	Matches []LogMatch `json:"matches,omitempty"`
	// Metrics are the last value of each metric the replicas reported, in lines and
	// metrics files (to this forwarder: a forwarder restarted with its worker sees only
	// later lines and rows).
	Metrics events.Metrics `json:"metrics,omitempty"`
	// Resources summarises the replicas' resource samples; nil without any.
	Resources *schemas.ResourceUse `json:"resources,omitempty"`
}

// LogMatch is the first line that matched one of ForwardLogsInput.LogPatterns.
type LogMatch struct {
	Pattern int    `json:"pattern"`
	Replica string `json:"replica"`
	Line    string `json:"line"`
}

// hangPoll is how often a forwarder with a hang timeout checks the replicas.
const hangPoll = time.Second

// ForwardLogs publishes every log line of every replica of an attempt to the log
// stream, in order per replica, and each metric line also as a metric event. It returns
// once every replica has finished and its output is drained, or, with a hang timeout,
// once the running replicas have been silent for that long. A retried forwarder (a
// worker restart) resumes after the last record the stream holds for each replica, so
// lines are neither lost nor repeated.
func (a *JobActivities) ForwardLogs(ctx context.Context, in ForwardLogsInput) (ForwardLogsResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	patterns := make([]*regexp.Regexp, 0, len(in.LogPatterns))
	for _, p := range in.LogPatterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return ForwardLogsResult{}, temporal.NewNonRetryableApplicationError("log pattern "+p, ErrTypeInvalidSpec, err)
		}
		patterns = append(patterns, re)
	}
	parser, err := newLineParser(in.MetricRegexes)
	if err != nil {
		return ForwardLogsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSpec, err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		hung     bool
		progress = make(map[string]int64, len(in.Replicas))
		lastLine = time.Now()
		result   ForwardLogsResult
		matched  = map[int]bool{}
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil && !hung {
			firstErr = err
			cancel()
		}
	}
	onLine := func(replica, line string) {
		mu.Lock()
		defer mu.Unlock()
		lastLine = time.Now()
		for i, re := range patterns {
			if !matched[i] && re.MatchString(line) {
				matched[i] = true
				result.Matches = append(result.Matches, LogMatch{Pattern: i, Replica: replica, Line: truncate(line, 1024)})
			}
		}
		if vals, _ := parser.parse(line); len(vals) > 0 {
			if result.Metrics == nil {
				result.Metrics = events.Metrics{}
			}
			maps.Copy(result.Metrics, vals)
		}
	}
	onValues := func(vals events.Metrics) {
		mu.Lock()
		defer mu.Unlock()
		if result.Metrics == nil {
			result.Metrics = events.Metrics{}
		}
		maps.Copy(result.Metrics, vals)
	}
	// The first replica's metrics files are read while its output is followed, and
	// once more when it is drained (filesDone).
	tails := a.metricFileTails(ctx, in, onValues)
	filesDone := make(chan struct{})
	for _, t := range tails {
		wg.Go(func() {
			if err := t.run(ctx, filesDone); err != nil && ctx.Err() == nil {
				fail(err)
			}
		})
	}
	for i, r := range in.Replicas {
		wg.Go(func() {
			f := &logForwarder{a: a, in: in, replica: r, parser: parser, onLine: onLine, onProgress: func(seq int64) {
				mu.Lock()
				progress[r.Name] = seq
				mu.Unlock()
			}}
			err := f.run(ctx)
			if i == 0 {
				close(filesDone)
			}
			if err != nil {
				fail(fmt.Errorf("forward logs of %s: %w", r.Name, err))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The resource sampler runs beside the forwarders, until they are done.
	rec := a.newResourceRecorder(ctx, in)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if rec != nil {
			rec.run(sampleCtx)
		}
	}()
	stopSampler := func() { stopSampling(); <-sampled }
	defer stopSampler()
	pacer, paced := a.pace(ctx)
	defer paced()
	hb := time.NewTimer(0)
	defer hb.Stop()
	var hangTick <-chan time.Time
	armed := false // the hang clock runs once every replica has been seen running
	if in.HangTimeout > 0 {
		t := time.NewTicker(hangPoll)
		defer t.Stop()
		hangTick = t.C
	}
	for {
		select {
		case <-done:
			stopSampler()
			mu.Lock()
			defer mu.Unlock()
			result.Resources = rec.use()
			if hung {
				return result, nil
			}
			return result, firstErr
		case now := <-hb.C:
			if pacer.due(now) {
				mu.Lock()
				snapshot := make(map[string]int64, len(progress))
				maps.Copy(snapshot, progress)
				mu.Unlock()
				activity.RecordHeartbeat(ctx, forwardHeartbeat{Progress: snapshot, Resources: rec.heartbeat()})
			}
			hb.Reset(pacer.wait(time.Now()))
		case <-hangTick:
			if !armed {
				st, err := a.Backend.Observe(ctx, in.Ref)
				if err != nil || !allRunning(st.Replicas) {
					continue
				}
				armed = true
				mu.Lock()
				lastLine = time.Now() // the clock starts when they all run
				mu.Unlock()
				continue
			}
			mu.Lock()
			quiet := time.Since(lastLine)
			if quiet >= in.HangTimeout && firstErr == nil {
				hung = true
				result.Hung, result.Quiet = true, quiet.Round(time.Millisecond)
				cancel()
			}
			mu.Unlock()
		}
	}
}

// allRunning reports whether every replica runs.
func allRunning(reps []schemas.ReplicaStatus) bool {
	for _, r := range reps {
		if r.Phase != schemas.ReplicaRunning {
			return false
		}
	}
	return len(reps) > 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// logForwarder forwards one replica's log.
type logForwarder struct {
	a          *JobActivities
	in         ForwardLogsInput
	replica    schemas.ReplicaStatus
	onProgress func(seq int64)
	onLine     func(replica, line string)
	// parser reads the metrics of a line (OpenDLC's metric lines, stdout collectors).
	parser *lineParser

	mu      sync.Mutex
	batch   []events.Msg
	lastSeq int64
	// written holds when each replica line of the batch was written, for the
	// forwarding metrics.
	written []time.Time
}

func (f *logForwarder) run(ctx context.Context) error {
	subject := events.JobLogSubject(f.in.Ref.Workspace, f.in.Ref.Job, f.replica.Role, f.replica.Index)
	after, err := f.resumePoint(ctx, subject)
	if err != nil {
		return err
	}
	flushEvery := f.a.LogFlushInterval
	if flushEvery <= 0 {
		flushEvery = 200 * time.Millisecond
	}
	maxBatch := f.a.LogBatch
	if maxBatch <= 0 {
		maxBatch = 256
	}
	// The flusher sleeps until a line starts a batch, then flushes it flushEvery later:
	// a quiet replica costs no wake-ups (a ticker per replica woke 10,000 replicas'
	// flushers 5 times a second each to find nothing to send).
	stopFlusher := make(chan struct{})
	flusherDone := make(chan error, 1)
	started := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(flushEvery)
		t.Stop()
		for {
			select {
			case <-stopFlusher:
				flusherDone <- nil
				return
			case <-started:
			}
			t.Reset(flushEvery)
			select {
			case <-stopFlusher:
				flusherDone <- nil
				return
			case <-t.C:
			}
			if err := f.flush(ctx); err != nil {
				flusherDone <- err
				return
			}
		}
	}()
	err = followLogs(ctx, f.a.Backend, f.in.Ref, f.replica.Name, after, func(l backend.LogLine) error {
		rec := events.LogRecord{
			Workspace: f.in.Ref.Workspace, Job: f.in.Ref.Job, UID: f.in.UID, Attempt: f.in.Ref.Attempt,
			Role: f.replica.Role, Index: f.replica.Index, Replica: f.replica.Name, Node: f.replica.Node,
			Stream: l.Stream, Seq: l.Seq, Time: l.Time, Line: l.Line,
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if len(f.batch) == 0 {
			select {
			case started <- struct{}{}:
			default: // a flush is due already
			}
		}
		f.batch = append(f.batch, events.Msg{Subject: subject, ID: logMsgID(f.in, f.replica.Name, l.Seq), Data: data})
		// A gap record is the worker's, not the replica's: no metric, no failure rule
		// match, and it does not count as output for hang detection.
		gap := l.Stream == backend.StreamGap
		if !gap {
			f.written = append(f.written, l.Time)
			if m, ok := f.metricMsg(ctx, l); ok {
				f.batch = append(f.batch, m)
			}
		}
		f.lastSeq = l.Seq
		full := len(f.batch) >= maxBatch
		f.mu.Unlock()
		if f.onLine != nil && !gap {
			f.onLine(f.replica.Name, l.Line)
		}
		if full {
			return f.flush(ctx)
		}
		return nil
	})
	close(stopFlusher)
	if ferr := <-flusherDone; err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	return f.flush(ctx)
}

// resumePoint reads the newest record of this replica's subject: if it belongs to this
// job and attempt, forwarding resumes after it (its sequence number, and for backends
// that resume by time, its time and text; see backend.LogResumer).
//
// Each lookup has its own deadline: a request sent while NATS is down or reconnecting
// can be lost, and under the activity's long deadline it would wait for an answer that
// never comes while the forwarder heartbeats on. A lookup that times out is tried again
// until NATS answers or ctx ends; other errors are returned.
func (f *logForwarder) resumePoint(ctx context.Context, subject string) (backend.LogCursor, error) {
	var data []byte
	for {
		lookup, cancel := context.WithTimeout(ctx, resumeLookupTimeout)
		d, err := f.a.Publisher.LastMsg(lookup, f.a.LogStream, subject)
		cancel()
		if err == nil {
			data = d
			break
		}
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return backend.LogCursor{}, err
		}
		warn(ctx, "reading where the log stops timed out; trying again",
			"job", f.in.Ref.Job, "replica", f.replica.Name, "error", err)
	}
	if data == nil {
		return backend.LogCursor{}, nil
	}
	var last events.LogRecord
	if json.Unmarshal(data, &last) != nil {
		return backend.LogCursor{}, nil //nolint:nilerr // not a record of ours: forward from the start
	}
	if last.UID == f.in.UID && last.Attempt == f.in.Ref.Attempt {
		return backend.LogCursor{Seq: last.Seq, Time: last.Time, Stream: last.Stream, Line: last.Line}, nil
	}
	return backend.LogCursor{}, nil
}

// followLogs follows a replica's log from after, by time where the backend resumes
// that way, else by sequence number.
func followLogs(ctx context.Context, b backend.Backend, ref backend.GangRef, replica string, after backend.LogCursor, fn func(backend.LogLine) error) error {
	if r, ok := b.(backend.LogResumer); ok {
		return r.FollowLogsFrom(ctx, ref, replica, after, fn)
	}
	return b.FollowLogs(ctx, ref, replica, after.Seq, fn)
}

// metricMsg is the metric event of a metric line, or of a line a stdout collector
// matched (false for other lines). NaN and
// infinite values are carried (events.Metrics); fields that are not numbers are left out
// with a warning. A line that cannot be encoded all the same is skipped with a warning:
// a metric must never stop the log from being forwarded.
func (f *logForwarder) metricMsg(ctx context.Context, l backend.LogLine) (events.Msg, bool) {
	vals, invalid := f.parser.parse(l.Line)
	if len(invalid) > 0 {
		warn(ctx, "metric fields that are not numbers left out",
			"job", f.in.Ref.Job, "replica", f.replica.Name, "seq", l.Seq, "fields", invalid)
	}
	if len(vals) == 0 {
		return events.Msg{}, false
	}
	id := fmt.Sprintf("%s:a%d:%s:m%d", f.in.UID, f.in.Ref.Attempt, f.replica.Name, l.Seq)
	ev, err := events.New(id, events.TypeJobMetric, f.in.Ref.Workspace,
		events.JobSource(f.in.Ref.Workspace, f.in.Ref.Job), f.in.Ref.Job, l.Time,
		events.MetricData{Job: f.in.Ref.Job, UID: f.in.UID, Attempt: f.in.Ref.Attempt, Replica: f.replica.Name, Seq: l.Seq, Values: vals})
	var data []byte
	if err == nil {
		data, err = json.Marshal(ev)
	}
	if err != nil {
		warn(ctx, "metric line not published", "job", f.in.Ref.Job,
			"replica", f.replica.Name, "seq", l.Seq, "error", err)
		return events.Msg{}, false
	}
	return events.Msg{Subject: events.JobMetricsSubject(f.in.Ref.Workspace, f.in.Ref.Job), ID: id, Data: data}, true
}

// flush publishes the pending batch. Publishing holds the lock so batches leave in
// order.
func (f *logForwarder) flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batch) == 0 {
		return nil
	}
	if err := f.a.Publisher.Publish(ctx, f.batch...); err != nil {
		return err
	}
	f.batch = f.batch[:0]
	f.recordForwarded()
	f.onProgress(f.lastSeq)
	return nil
}

// resumeLookupTimeout bounds one read of where a replica's forwarded log stops.
const resumeLookupTimeout = 5 * time.Second

func logMsgID(in ForwardLogsInput, replica string, seq int64) string {
	return fmt.Sprintf("%s:a%d:%s:%d", in.UID, in.Ref.Attempt, replica, seq)
}

// warn logs through the activity's logger; outside an activity (a unit test) it logs
// nothing.
func warn(ctx context.Context, msg string, keyvals ...any) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn(msg, keyvals...)
	}
}
