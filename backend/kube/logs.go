package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/opendlc/opendlc/backend"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxLogLine bounds one log line; the rest of a longer line is dropped, so a replica
// that writes binary without newlines cannot exhaust the worker's memory.
const maxLogLine = 1 << 20

// eofPatience is how long FollowLogs waits, after the log stream ended, for the pod to
// be reported finished before it concludes the stream broke and reopens it.
const eofPatience = 10 * time.Second

// finishedAttempts is how many times FollowLogs tries to open the log of a finished pod
// before concluding it cannot be read.
const finishedAttempts = 3

var _ backend.LogResumer = (*Backend)(nil)

// FollowLogs is FollowLogsFrom after line afterSeq, with no time: the first afterSeq
// lines of the container's log are skipped by count, which holds only as long as the
// kubelet has not rotated the log. The log forwarder resumes with FollowLogsFrom.
func (b *Backend) FollowLogs(ctx context.Context, ref backend.GangRef, replica string, afterSeq int64, fn func(backend.LogLine) error) error {
	return b.FollowLogsFrom(ctx, ref, replica, backend.LogCursor{Seq: afterSeq}, fn)
}

// FollowLogsFrom calls fn for every line the replica's container writes after the line
// from describes, numbered on from from.Seq+1. It waits while the pod is Pending,
// follows the log while it runs, and returns nil once the pod has finished and its log
// is drained, or is gone. Kubernetes merges stdout and stderr into one log, so every
// line is "stdout".
//
// Every read asks for timestamps and, once a line has been delivered, for the log since
// the second of the latest time delivered (sinceTime), and skips what was delivered
// before: the lines it starts with that are older than that second, or of that second
// and counted as delivered (see logFollower); the rest of the read is new, whatever its
// times (stdout and stderr lines are stamped apart, so a line may follow one stamped
// after it). So a broken stream, a worker restart (from comes from the forwarded log)
// and a kubelet log rotation neither repeat nor renumber lines. When the container has
// restarted, the previous instance's log is read (previous=true) before the current
// one's.
//
// A followed stream is closed as soon as the pod finishes or its container restarts
// (a kubelet closes it itself; kwok does not), and the log is read once more without
// follow to drain it. A finished pod whose log cannot be read after a few tries, or a
// restarted container whose previous log cannot be, leaves a gap record in the log
// (backend.StreamGap) and a Warning event on the pod, never silence. While the pod runs,
// an unreadable log is retried with backoff from the poll interval. An error from fn
// stops the follow and is returned as is.
func (b *Backend) FollowLogsFrom(ctx context.Context, ref backend.GangRef, replica string, from backend.LogCursor, fn func(backend.LogLine) error) error {
	b.cache.start()
	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return fmt.Errorf("%w: %s (namespace %s is not the worker's)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	f := newLogFollower(replica, from, b.clock.Now, fn)
	err := b.followLogs(ctx, ns, ref, replica, f)
	if f.dropped != "" {
		b.logger.Warn("kube: the kubelet ended a replica's log with a message of its own, not delivered as a line",
			"namespace", ns, "replica", replica, "message", f.dropped)
	}
	if fnErr, ok := errors.AsType[*callbackError](err); ok {
		return fnErr.err
	}
	return err
}

func (b *Backend) followLogs(ctx context.Context, ns string, ref backend.GangRef, replica string, f *logFollower) error {
	backoff := b.poll
	loggedFailure := false
	finishedFailures := 0
	restarts := int32(-1) // the container's restart count at the last read; -1: none yet
	idleEnds := 0         // streams in a row that ended cleanly with no new line (logs_idle.go)
	for {
		pod, err := b.logPod(ctx, ns, ref, replica)
		if err != nil {
			return err
		}
		if pod == nil {
			return nil // gone: nothing more will be written
		}
		if pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" {
			if err := b.wait(ctx, b.changesOf(ns, ref), b.poll); err != nil {
				return err
			}
			continue
		}
		finished := podFinished(pod)
		if rc := restartCount(pod); rc > restarts {
			if rc > 0 {
				if err := b.readPrevious(ctx, ns, pod, f); err != nil {
					return err
				}
			}
			restarts = rc
		}
		if !b.logLimiter.TryAccept() {
			if err := b.waitLogBudget(ctx, ns, ref, pod.Name, restarts, finished); err != nil {
				return err
			}
			continue
		}
		stopped := false
		seqAtOpen := f.seq
		streamCtx, cancel := context.WithCancel(ctx)
		watched := make(chan struct{})
		if finished {
			close(watched)
		} else {
			go func() {
				defer close(watched)
				if b.watchLogPod(streamCtx, ns, ref, pod.Name, restarts) {
					stopped = true
					cancel()
				}
			}()
		}
		stream, err := b.client.CoreV1().Pods(ns).GetLogs(pod.Name, f.options(false, !finished)).Stream(streamCtx)
		opened := err == nil
		if opened {
			err = f.consume(stream, finished)
			stream.Close()
		}
		cancel()
		<-watched
		var fnErr *callbackError
		switch {
		case errors.As(err, &fnErr):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case stopped:
			// The pod finished or its container restarted: read again, without
			// follow once it has finished.
			continue
		case err != nil && opened:
			// The stream broke: reopen it.
			b.logger.Debug("kube: pod log stream broke; reopening", "namespace", ns, "pod", pod.Name, "error", err)
			if err := b.wait(ctx, nil, b.poll); err != nil {
				return err
			}
			continue
		case err != nil:
			if !loggedFailure {
				b.logger.Debug("kube: pod log unavailable; retrying until the pod finishes",
					"namespace", ns, "pod", pod.Name, "error", err)
				loggedFailure = true
			}
			if finished {
				// Give a real kubelet's hiccup a second chance before concluding the log
				// cannot be read.
				if finishedFailures++; finishedFailures >= finishedAttempts {
					return b.logGap(ctx, ns, pod, f, fmt.Sprintf("the log of pod %s/%s could not be read after it finished: %v", ns, pod.Name, err))
				}
				if err := b.wait(ctx, nil, b.poll); err != nil {
					return err
				}
				continue
			}
			// Wake up early when this pod finishes, goes or restarts (a finished pod's
			// log that still cannot be read is given up quickly), not at every change
			// of its gang: while a large gang comes up, every one of its pods changes
			// several times, and each change would send every follower whose log is
			// not readable yet to the API server again.
			if err := b.waitPodEnds(ctx, ns, ref, pod.Name, restarts, backoff); err != nil {
				return err
			}
			backoff = b.nextLogRetry(backoff)
			continue
		}
		backoff = b.poll
		// The stream ended cleanly. Without follow, the log is drained. A kubelet
		// closes a followed stream once the container has exited and its log is
		// drained: confirm with the pod's phase; if the pod still runs after a while,
		// the stream was cut for another reason and is reopened.
		if finished {
			return f.finish()
		}
		idleEnds = nextIdleEnds(idleEnds, f.seq != seqAtOpen)
		done, err := b.awaitFinished(ctx, ns, ref, replica, idlePatience(idleEnds))
		if err != nil {
			return err
		}
		if done {
			return f.finish()
		}
	}
}

// readPrevious reads the log of the container's previous instance, without follow, up
// to where it ends: the lines it wrote after the last one delivered before it
// restarted. A log that cannot be read leaves a gap record.
func (b *Backend) readPrevious(ctx context.Context, ns string, pod *corev1.Pod, f *logFollower) error {
	for !b.logLimiter.TryAccept() {
		if err := b.wait(ctx, nil, b.logBudgetRetry()); err != nil {
			return err
		}
	}
	stream, err := b.client.CoreV1().Pods(ns).GetLogs(pod.Name, f.options(true, false)).Stream(ctx)
	if err == nil {
		err = f.consume(stream, true)
		stream.Close()
	}
	if _, ok := errors.AsType[*callbackError](err); ok {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return b.logGap(ctx, ns, pod, f, fmt.Sprintf("the log of the previous run of pod %s/%s's container (restarted %d times) could not be read: %v",
			ns, pod.Name, restartCount(pod), err))
	}
	return f.finish()
}

// watchLogPod waits until the pod has finished or gone, or its container's restart
// count is no longer restarts (true), or ctx ends (false). Every one of those is an
// informer event of the gang, which wakes it; it reads the pod again without one only
// every logPodRecheck: with 10,000 followed pods, a check every poll interval was
// 10,000 wake-ups a second of a worker with nothing to do.
func (b *Backend) watchLogPod(ctx context.Context, ns string, ref backend.GangRef, name string, restarts int32) bool {
	for {
		changed := b.changesOf(ns, ref)
		pod, err := b.cache.pod(ctx, ns, name)
		if err == nil && (pod == nil || podFinished(pod) || restartCount(pod) != restarts) {
			return true
		}
		if b.wait(ctx, changed, max(b.poll, logPodRecheck)) != nil {
			return false
		}
	}
}

// logPodRecheck is how often watchLogPod reads its pod without an informer event.
const logPodRecheck = 30 * time.Second

// waitPodEnds waits up to d, or until the pod has finished or gone, or its
// container's restart count is no longer restarts.
func (b *Backend) waitPodEnds(ctx context.Context, ns string, ref backend.GangRef, name string, restarts int32, d time.Duration) error {
	deadline := b.clock.Now().Add(d)
	for {
		changed := b.changesOf(ns, ref)
		pod, err := b.cache.pod(ctx, ns, name)
		if err == nil && (pod == nil || podFinished(pod) || restartCount(pod) != restarts) {
			return nil
		}
		left := deadline.Sub(b.clock.Now())
		if left <= 0 {
			return nil
		}
		if err := b.wait(ctx, changed, left); err != nil {
			return err
		}
	}
}

// restartCount is how many times the replica's container has restarted.
func restartCount(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName {
			return cs.RestartCount
		}
	}
	return 0
}

// logGap delivers a gap record saying why, and records a Warning event on the pod.
func (b *Backend) logGap(ctx context.Context, ns string, pod *corev1.Pod, f *logFollower, why string) error {
	b.logger.Warn("kube: part of a pod log is lost", "namespace", ns, "pod", pod.Name, "reason", why)
	b.gapEvent(ctx, pod, why)
	return f.gap(why)
}

// EventReasonLogGap is the reason of the Warning event recorded on a pod whose log
// could not be read in full (see FollowLogsFrom).
const EventReasonLogGap = "LogGap"

// gapEvent records a Warning event on the pod saying why part of its log is lost. It
// is named after the pod, so a retried follow does not record it twice; failing to
// record it is logged, never fatal to the log's forwarding.
func (b *Backend) gapEvent(ctx context.Context, pod *corev1.Pod, why string) {
	now := metav1.NewTime(b.clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + ".log-gap", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			FieldPath: "spec.containers{" + ContainerName + "}",
		},
		Reason: EventReasonLogGap, Message: why, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: eventComponent},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: eventComponent,
	}
	_, err := b.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		b.logger.Warn("kube: recording the log gap event", "namespace", pod.Namespace, "pod", pod.Name, "error", err)
	}
}

// eventComponent is the source of the events the backend records.
const eventComponent = "opendlc.io/worker"

// awaitFinished waits up to patience for the pod to finish or go.
func (b *Backend) awaitFinished(ctx context.Context, ns string, ref backend.GangRef, replica string, patience time.Duration) (bool, error) {
	deadline := b.clock.Now().Add(patience)
	for {
		changed := b.changesOf(ns, ref)
		pod, err := b.logPod(ctx, ns, ref, replica)
		if err != nil {
			return false, err
		}
		if pod == nil || podFinished(pod) {
			return true, nil
		}
		left := deadline.Sub(b.clock.Now())
		if left <= 0 {
			return false, nil
		}
		if err := b.wait(ctx, changed, min(left, b.poll)); err != nil {
			return false, err
		}
	}
}

// logPod returns the replica's pod; nil when it is gone for good (or, in a stopped
// gang, was never created). It waits while the pod is still to be created.
func (b *Backend) logPod(ctx context.Context, ns string, ref backend.GangRef, replica string) (*corev1.Pod, error) {
	for {
		changed := b.changesOf(ns, ref)
		pod, err := b.cache.pod(ctx, ns, replica)
		if err != nil {
			return nil, err
		}
		if pod != nil {
			if pod.Labels[LabelGang] != gangValue(ref) {
				return nil, fmt.Errorf("kube: pod %s/%s is not a replica of %s", ns, replica, ref.ID())
			}
			return pod, nil
		}
		rec, found, err := b.record(ctx, ns, ref)
		if err != nil {
			return nil, err
		}
		if !found {
			pods, err := listGangPods(ctx, b.client, ns, ref)
			if err != nil {
				return nil, err
			}
			if len(pods) == 0 {
				return nil, fmt.Errorf("%w: %s (namespace %s)", backend.ErrGangNotFound, ref.ID(), ns)
			}
			return nil, nil // its Service is gone and so is it
		}
		if !slices.ContainsFunc(rec.replicas, func(r replicaRef) bool { return r.Name == replica }) {
			return nil, fmt.Errorf("kube: gang %s has no replica %q", ref.ID(), replica)
		}
		if rec.launched || rec.stopped {
			return nil, nil
		}
		if err := b.wait(ctx, changed, b.poll); err != nil {
			return nil, err
		}
	}
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// callbackError carries fn's error out of consume, to tell it from a stream error.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// logFollower delivers the lines of successive reads of one container's log (each
// with timestamps, from the second of the latest line delivered, or from the start) and
// delivers each line once, numbered in order.
//
// What was delivered is told from what was not by the log's order and its times. A read
// returns the log's lines, in the log's order, from a second on; those delivered before
// come first in it, and every line after the first new one is new, whatever its time.
// The kubelet stamps each line with the time (to the nanosecond) its runtime read it,
// but the runtime stamps stdout and stderr apart (containerd stamps a line of one
// before it writes it to the one log file, and a line of the other stamped later may
// be written first), so the times of one container's log are in order only nearly: a
// line may follow one stamped a little later. A read from the second of the latest
// time delivered (last) therefore skips, until it meets a new line, the lines older
// than that second or than a gap record it resumed after (floor), and as many lines of
// that second up to last as were delivered (count); the first line after them, or
// stamped after last, is new and so is the rest of the read. This holds whatever the
// log's line numbers are, which a kubelet log rotation changes.
//
// Resumed from a LogCursor (a new worker), only the last line delivered is known, not
// how many lines of its second came before it: lines of its time are held until the
// one equal to the cursor's line is seen, and those after it are new. Should two lines
// of one nanosecond have the same text, the first is taken for the boundary and the
// lines between them are delivered again. If the boundary line is no longer in the log
// (it was rotated away while nobody followed it), a gap record says lines may be
// missing and the held lines are delivered.
type logFollower struct {
	replica string
	now     func() time.Time
	fn      func(backend.LogLine) error

	seq       int64     // number of the last line delivered (or of from)
	countSkip int64     // with no boundary time: lines to skip at the start of the log
	last      time.Time // the latest time of a line delivered (or from's); zero: none, or unknown
	count     int64     // lines delivered with a time from last's second up to last, after floor
	floor     time.Time // resumed after a gap record of this time: every line up to it is old
	// dropped is the kubelet's own text that ended the last read, unstamped (finish).
	dropped string
	exact   bool   // count is known; !exact: resumed, the cursor's line is to be found
	cursor  string // !exact: the text of the cursor's line

	// One read.
	seen     int64      // complete lines read
	passed   bool       // a new line was read: every later line of the read is new
	skipped  int64      // lines of last's second read and skipped as counted in count
	oldInSec int64      // !exact: lines of the cursor's second older than it, read
	held     []heldLine // !exact: lines of the cursor's time read before it
	partial  []byte     // an unterminated last line, delivered only by finish
}

// heldLine is a line held until it is known whether it was delivered before.
type heldLine struct {
	t    time.Time
	text string
}

func newLogFollower(replica string, from backend.LogCursor, now func() time.Time, fn func(backend.LogLine) error) *logFollower {
	f := &logFollower{replica: replica, now: now, fn: fn, seq: max(from.Seq, 0)}
	switch {
	case from.Time.IsZero():
		f.countSkip, f.exact = f.seq, true
	case from.Stream == backend.StreamGap:
		f.last, f.floor, f.exact = from.Time.UTC(), from.Time.UTC(), true
	default:
		f.last, f.cursor = from.Time.UTC(), from.Line
	}
	return f
}

// options are the log request of the next read: the container's current log, or its
// previous instance's, from the second of the boundary.
func (f *logFollower) options(previous, follow bool) *corev1.PodLogOptions {
	o := &corev1.PodLogOptions{Container: ContainerName, Follow: follow, Previous: previous, Timestamps: true}
	if !f.last.IsZero() {
		since := metav1.NewTime(f.last.Truncate(time.Second))
		o.SinceTime = &since
	}
	return o
}

// consume reads one stream of `kubectl logs --timestamps` output, handing the lines not
// delivered yet to fn. It returns nil at a clean end of stream, keeping an unterminated
// last line for finish, and an error when the stream breaks or fn fails (a
// *callbackError). final says the log ends with this stream (no follow): the boundary
// is settled at its end.
func (f *logFollower) consume(r io.Reader, final bool) error {
	f.seen, f.passed, f.skipped, f.oldInSec, f.held, f.partial = 0, false, 0, 0, nil, nil
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		body := chunk
		if err == nil {
			body = chunk[:len(chunk)-1]
		}
		if room := maxLogLine - len(line); room > 0 {
			line = append(line, body[:min(len(body), room)]...)
		}
		switch {
		case err == nil:
			if err := f.line(line); err != nil {
				return err
			}
			line = line[:0]
		case errors.Is(err, bufio.ErrBufferFull):
			// a line longer than the buffer: keep reading it
		case errors.Is(err, io.EOF):
			if len(line) > 0 {
				f.partial = append([]byte(nil), line...)
			}
			if final && !f.exact && len(f.held) > 0 {
				return f.boundaryLost()
			}
			return nil
		default:
			return err
		}
	}
}

// finish delivers the unterminated last line of a finished log. One without a timestamp
// is not the container's: the kubelet stamps every line of a container's log when asked
// to (every read here asks), and when the log file goes away in the middle of a
// followed read (the container removed with its pod) it writes its own error after the
// lines it sent, unterminated ("failed to try resolving symlinks in path ...: no such
// file or directory"). That text is not delivered as a line; dropped keeps it for the
// caller to log.
func (f *logFollower) finish() error {
	if len(f.partial) == 0 {
		return nil
	}
	p := f.partial
	f.partial = nil
	if _, text, stamped := splitTimestamp(p, f.now); !stamped {
		f.dropped = text
		return nil
	}
	return f.line(p)
}

// line handles one complete line of the current read.
func (f *logFollower) line(raw []byte) error {
	f.seen++
	t, text, stamped := splitTimestamp(raw, f.now)
	switch {
	case !stamped:
		return f.emit(t, text) // cannot be placed: delivered, leaving the boundary
	case f.passed:
		return f.deliver(t, text)
	case f.last.IsZero():
		if f.seen <= f.countSkip {
			return nil
		}
		return f.deliver(t, text)
	case !f.exact:
		return f.seek(t, text)
	case !t.After(f.floor), t.Before(f.last.Truncate(time.Second)):
		return nil // delivered before
	case f.skipped < f.count && !t.After(f.last):
		f.skipped++
		return nil
	default:
		return f.deliver(t, text)
	}
}

// seek handles a line of a resumed follower's read before the cursor's line is found.
func (f *logFollower) seek(t time.Time, text string) error {
	switch {
	case t.Before(f.last):
		if !t.Before(f.last.Truncate(time.Second)) {
			f.oldInSec++
		}
		return nil
	case t.After(f.last):
		if err := f.boundaryLost(); err != nil {
			return err
		}
		return f.deliver(t, text)
	case text == f.cursor:
		// The boundary line: those of its second before it were delivered too, and
		// every line after it is new.
		f.exact, f.passed = true, true
		f.count = f.oldInSec + int64(len(f.held)) + 1
		f.held = nil
		return nil
	default:
		f.held = append(f.held, heldLine{t, text})
		return nil
	}
}

// boundaryLost handles a read in which the line a resumed follower stopped at is
// missing although later lines (or the end of the log) came: the log was rotated (or the
// run that wrote it is older than the previous one), and what was written between that
// line and the oldest one left is lost. A gap record
// says so, and the lines held at the boundary's time are delivered.
func (f *logFollower) boundaryLost() error {
	f.exact, f.passed = true, true
	held := f.held
	f.held, f.count = nil, f.oldInSec
	if err := f.gap(fmt.Sprintf("the line forwarded last (%s) is no longer in the container's log (rotated, or the container restarted more than once, while nobody followed it): lines written after it until the next line here may be missing",
		f.last.Format(time.RFC3339Nano))); err != nil {
		return err
	}
	for _, h := range held {
		if err := f.deliver(h.t, h.text); err != nil {
			return err
		}
	}
	return nil
}

// deliver hands one line to fn and moves the boundary past it: the rest of the read
// is new, and a later read skips it.
func (f *logFollower) deliver(t time.Time, text string) error {
	if err := f.emit(t, text); err != nil {
		return err
	}
	f.passed = true
	if f.last.IsZero() || t.After(f.last) {
		if f.last.IsZero() || t.Truncate(time.Second).After(f.last.Truncate(time.Second)) {
			f.count = 0 // every line delivered before is older than the new second
		}
		f.last = t
	}
	// A line stamped before last's second (stdout and stderr are stamped apart) is not
	// in a read from that second.
	if !t.Before(f.last.Truncate(time.Second)) && t.After(f.floor) {
		f.count++
	}
	return nil
}

// emit hands one line to fn.
func (f *logFollower) emit(t time.Time, text string) error {
	if err := f.fn(backend.LogLine{Replica: f.replica, Stream: "stdout", Seq: f.seq + 1, Time: t, Line: text}); err != nil {
		return &callbackError{err}
	}
	f.seq++
	return nil
}

// gap hands fn a gap record saying why part of the log is missing, stamped with the
// boundary's time (now when nothing was delivered).
func (f *logFollower) gap(why string) error {
	t := f.last
	if t.IsZero() {
		t = f.now().UTC()
	}
	if err := f.fn(backend.LogLine{Replica: f.replica, Stream: backend.StreamGap, Seq: f.seq + 1, Time: t, Line: backend.GapPrefix + why}); err != nil {
		return &callbackError{err}
	}
	f.seq++
	return nil
}

// splitTimestamp splits the RFC 3339 timestamp the API server puts before each line
// (timestamps=true); a line without one is stamped now (false).
func splitTimestamp(raw []byte, now func() time.Time) (time.Time, string, bool) {
	if i := bytes.IndexByte(raw, ' '); i > 0 {
		if t, err := time.Parse(time.RFC3339Nano, string(raw[:i])); err == nil {
			return t.UTC(), string(raw[i+1:]), true
		}
	}
	return now().UTC(), string(raw), false
}
