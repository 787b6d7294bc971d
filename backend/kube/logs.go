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

// FollowLogs calls fn for every line the replica's container writes, numbered from 1
// from the start of its log, skipping the first afterSeq. It waits while the pod is
// Pending, follows the log while it runs, and returns nil once the pod has finished and
// its log is drained, or is gone. Kubernetes merges stdout and stderr into one log, so
// every line is "stdout". A broken stream is reopened from the start, skipping the lines
// already delivered, so numbering never shifts.
//
// When the log endpoint cannot be reached at all, as for pods of simulated (kwok) nodes,
// which have no kubelet, FollowLogs retries while the pod runs, and returns nil once it
// has finished and a few more tries failed (with backoff from the poll interval),
// logging the failure at debug level: those pods have no log to lose. An error from fn
// stops the follow and is returned as is.
func (b *Backend) FollowLogs(ctx context.Context, ref backend.GangRef, replica string, afterSeq int64, fn func(backend.LogLine) error) error {
	b.cache.start()
	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return fmt.Errorf("%w: %s (namespace %s is not the worker's)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	f := &logFollower{replica: replica, delivered: afterSeq, now: b.clock.Now, fn: fn}
	backoff := b.poll
	loggedFailure := false
	finishedFailures := 0
	for {
		changed := b.cache.changes()
		pod, err := b.logPod(ctx, ns, ref, replica)
		if err != nil {
			return err
		}
		if pod == nil {
			return nil // gone: nothing more will be written
		}
		if pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" {
			if err := b.wait(ctx, changed, b.poll); err != nil {
				return err
			}
			continue
		}
		finishedAtOpen := podFinished(pod)
		stream, err := b.client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: ContainerName, Follow: true, Timestamps: true,
		}).Stream(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !loggedFailure {
				b.logger.Debug("kube: pod log unavailable; retrying until the pod finishes",
					"namespace", ns, "pod", pod.Name, "error", err)
				loggedFailure = true
			}
			wait := backoff
			if finishedAtOpen {
				// Give a real kubelet's hiccup a second chance before concluding the log
				// cannot be read.
				if finishedFailures++; finishedFailures >= finishedAttempts {
					return nil
				}
				wait = b.poll
			}
			// Wake up early when the pod changes: once it has finished, a log that
			// still cannot be read is given up quickly.
			if err := b.wait(ctx, changed, wait); err != nil {
				return err
			}
			backoff = min(2*backoff, 10*b.poll)
			continue
		}
		backoff = b.poll
		err = f.consume(stream)
		stream.Close()
		var fnErr *callbackError
		switch {
		case errors.As(err, &fnErr):
			return fnErr.err
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// The stream broke: reopen it.
			b.logger.Debug("kube: pod log stream broke; reopening", "namespace", ns, "pod", pod.Name, "error", err)
			if err := b.wait(ctx, nil, b.poll); err != nil {
				return err
			}
			continue
		}
		// The stream ended cleanly: the kubelet closes it once the container has exited
		// and its log is drained. Confirm with the pod's phase; if the pod still runs
		// after a while, the stream was cut for another reason and is reopened.
		if finishedAtOpen {
			return f.flush()
		}
		done, err := b.awaitFinished(ctx, ns, ref, replica)
		if err != nil {
			return err
		}
		if done {
			return f.flush()
		}
	}
}

// awaitFinished waits up to eofPatience for the pod to finish or go.
func (b *Backend) awaitFinished(ctx context.Context, ns string, ref backend.GangRef, replica string) (bool, error) {
	deadline := b.clock.Now().Add(eofPatience)
	for {
		changed := b.cache.changes()
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
		changed := b.cache.changes()
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

// logFollower numbers the lines of successive reads of one log, each read from the
// start, and delivers each line once.
type logFollower struct {
	replica   string
	delivered int64 // lines handed to fn (or skipped by afterSeq)
	now       func() time.Time
	fn        func(backend.LogLine) error

	seen    int64  // complete lines read in the current stream
	partial []byte // an unterminated last line, delivered only by flush
}

// consume reads one stream of `kubectl logs --timestamps` output from its start,
// counting lines and handing those not delivered yet to fn. It returns nil at a clean
// end of stream, keeping an unterminated last line for flush.
func (f *logFollower) consume(r io.Reader) error {
	f.seen, f.partial = 0, nil
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
			return nil
		default:
			return err
		}
	}
}

// flush delivers the unterminated last line of a finished log.
func (f *logFollower) flush() error {
	if len(f.partial) == 0 {
		return nil
	}
	p := f.partial
	f.partial = nil
	if err := f.line(p); err != nil {
		if fnErr, ok := errors.AsType[*callbackError](err); ok {
			return fnErr.err
		}
		return err
	}
	return nil
}

// line counts one complete line and delivers it unless it was delivered before.
func (f *logFollower) line(raw []byte) error {
	f.seen++
	if f.seen <= f.delivered {
		return nil
	}
	t, text := splitTimestamp(raw, f.now)
	if err := f.fn(backend.LogLine{Replica: f.replica, Stream: "stdout", Seq: f.seen, Time: t, Line: text}); err != nil {
		return &callbackError{err}
	}
	f.delivered = f.seen
	return nil
}

// splitTimestamp splits the RFC 3339 timestamp the API server puts before each line
// (timestamps=true); a line without one is stamped now.
func splitTimestamp(raw []byte, now func() time.Time) (time.Time, string) {
	if i := bytes.IndexByte(raw, ' '); i > 0 {
		if t, err := time.Parse(time.RFC3339Nano, string(raw[:i])); err == nil {
			return t.UTC(), string(raw[i+1:])
		}
	}
	return now().UTC(), string(raw)
}
