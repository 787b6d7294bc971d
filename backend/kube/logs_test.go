package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// line is what a test compares of a LogLine.
type line struct {
	Seq  int64
	Time string
	Text string
}

func TestLogFollower(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const ts1, ts2, ts3 = "2026-05-01T10:00:00.000000001Z", "2026-05-01T10:00:01Z", "2026-05-01T18:00:02.5+08:00"
	const ts3UTC = "2026-05-01T10:00:02.5Z"
	const tsLater, tsLater2 = "2026-05-01T10:00:01.25Z", "2026-05-01T10:00:01.5Z"
	// The end of a trainer's log: its last checkpoint of epoch 9, the stderr line after
	// it, stamped after the metric line of epoch 10 that follows it in the log.
	const tsM9, tsM, tsP, tsC, tsD = "2026-05-01T10:00:09.3Z", "2026-05-01T10:00:09.4Z", "2026-05-01T10:00:09.401Z",
		"2026-05-01T10:00:09.42Z", "2026-05-01T10:00:09.5Z"
	t1, _ := time.Parse(time.RFC3339Nano, ts1)
	t2, _ := time.Parse(time.RFC3339Nano, ts2)
	long := strings.Repeat("x", maxLogLine+10)
	gapLine := func(at string) string {
		return "gap " + backend.GapPrefix + "the line forwarded last (" + at +
			") is no longer in the container's log (rotated, or the container restarted more than once, while nobody followed it): lines written after it until the next line here may be missing"
	}
	tests := map[string]struct {
		// streams are successive reads of the same log; a stream ending in "!" breaks
		// there (an error) instead of ending cleanly. The last one is read as final
		// (no follow) when final is set, and its unterminated last line flushed.
		streams []string
		from    backend.LogCursor
		final   bool
		want    []line
	}{
		"the kubelet's own error after the last line is not a line": {
			streams: []string{ts1 + " epoch 1\n" + ts2 + " done\nfailed to try resolving symlinks in path \"/var/log/pods/ns_p_u/main/0.log\": lstat /var/log/pods/ns_p_u/main/0.log: no such file or directory"},
			final:   true,
			want:    []line{{1, ts1, "epoch 1"}, {2, ts2, "done"}},
		},
		"from the start": {
			streams: []string{ts1 + " epoch 1\n" + ts2 + " epoch 2\n"},
			want:    []line{{1, ts1, "epoch 1"}, {2, ts2, "epoch 2"}},
		},
		"after a sequence number, without a time": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n" + ts2 + " c\n"},
			from:    backend.LogCursor{Seq: 2},
			want:    []line{{3, ts2, "c"}},
		},
		"reopened after a break": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n" + ts2 + " par!", ts2 + " b\n" + ts2 + " partial\n" + ts3 + " d\n"},
			want:    []line{{1, ts1, "a"}, {2, ts2, "b"}, {3, ts2, "partial"}, {4, ts3UTC, "d"}},
		},
		"lines of one time are told apart by count when reopened": {
			streams: []string{ts2 + " same\n" + ts2 + " same\n!", ts2 + " same\n" + ts2 + " same\n" + ts2 + " same\n"},
			want:    []line{{1, ts2, "same"}, {2, ts2, "same"}, {3, ts2, "same"}},
		},
		"a reopened read from an earlier second skips older lines": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n", ts1 + " a\n" + ts2 + " b\n" + ts3 + " c\n"},
			want:    []line{{1, ts1, "a"}, {2, ts2, "b"}, {3, ts3UTC, "c"}},
		},
		"resumed from a cursor": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n" + ts3 + " c\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "b"},
			want:    []line{{8, ts3UTC, "c"}},
		},
		"resumed among lines of the cursor's time": {
			streams: []string{ts2 + " x\n" + ts2 + " y\n" + ts2 + " z\n" + ts3 + " c\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "y"},
			want:    []line{{8, ts2, "z"}, {9, ts3UTC, "c"}},
		},
		"resumed, then reopened among lines of the cursor's time": {
			streams: []string{ts2 + " x\n" + ts2 + " y\n!", ts2 + " x\n" + ts2 + " y\n" + ts2 + " z\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "y"},
			want:    []line{{8, ts2, "z"}},
		},
		"resumed after a rotation that took the cursor's line": {
			streams: []string{ts3 + " c\n" + ts3 + " d\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "b"},
			want:    []line{{8, ts2, gapLine(ts2)}, {9, ts3UTC, "c"}, {10, ts3UTC, "d"}},
		},
		"lines of the cursor's time after a rotation that took it": {
			streams: []string{ts2 + " late\n" + ts3 + " c\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "b"},
			want:    []line{{8, ts2, gapLine(ts2)}, {9, ts2, "late"}, {10, ts3UTC, "c"}},
		},
		"the end of a finished log settles a missing cursor line": {
			streams: []string{ts2 + " late\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "b"},
			final:   true,
			want:    []line{{8, ts2, gapLine(ts2)}, {9, ts2, "late"}},
		},
		"a followed stream holds lines that may be old": {
			streams: []string{ts2 + " late\n"},
			from:    backend.LogCursor{Seq: 7, Time: t2, Line: "b"},
		},
		"resumed after a gap record": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n" + ts3 + " c\n"},
			from:    backend.LogCursor{Seq: 3, Time: t2, Stream: backend.StreamGap, Line: backend.GapPrefix + "x"},
			want:    []line{{4, ts3UTC, "c"}},
		},
		"resumed from before the log": {
			streams: []string{ts2 + " b\n"},
			from:    backend.LogCursor{Seq: 1, Time: t1, Line: "a"},
			want:    []line{{2, ts1, gapLine(ts1)}, {3, ts2, "b"}},
		},
		"unterminated last line of a finished log": {
			streams: []string{ts1 + " a\n" + ts2 + " done"},
			final:   true,
			want:    []line{{1, ts1, "a"}, {2, ts2, "done"}},
		},
		"unterminated last line of a broken stream is not delivered": {
			streams: []string{ts1 + " a\n" + ts2 + " do!"},
			want:    []line{{1, ts1, "a"}},
		},
		// A kubelet stamps stdout and stderr lines apart (containerd stamps each stream's
		// line before it writes it to the one log), so a line may come after one stamped
		// later: here rank 0's stderr line of epoch 9 before its stdout metric line of
		// epoch 10.
		"a line stamped before the one written before it": {
			streams: []string{tsM9 + " dlc:checkpoint step=288\n" + tsP + " pruned checkpoints at steps [256] (keeping 3)\n" +
				tsM + " dlc:metric epoch=10 step=320\n" + tsC + " dlc:checkpoint step=320\n"},
			want: []line{{1, tsM9, "dlc:checkpoint step=288"}, {2, tsP, "pruned checkpoints at steps [256] (keeping 3)"},
				{3, tsM, "dlc:metric epoch=10 step=320"}, {4, tsC, "dlc:checkpoint step=320"}},
		},
		"a followed stream ended, then drained, with a line stamped before the one written before it": {
			streams: []string{tsM9 + " c9\n" + tsP + " pruned\n",
				tsM9 + " c9\n" + tsP + " pruned\n" + tsM + " metric 10\n" + tsC + " c10\n" + tsD + " done"},
			final: true,
			want:  []line{{1, tsM9, "c9"}, {2, tsP, "pruned"}, {3, tsM, "metric 10"}, {4, tsC, "c10"}, {5, tsD, "done"}},
		},
		"reopened after a break behind a line stamped before the one written before it": {
			streams: []string{tsP + " pruned\n" + tsM + " metric 10\n!", tsP + " pruned\n" + tsM + " metric 10\n" + tsM9 + " late\n" + tsC + " c10\n"},
			want:    []line{{1, tsP, "pruned"}, {2, tsM, "metric 10"}, {3, tsM9, "late"}, {4, tsC, "c10"}},
		},
		"reopened among lines of one second stamped out of order": {
			streams: []string{tsM + " a\n" + tsP + " b\n" + tsM9 + " c\n!", tsM + " a\n" + tsP + " b\n" + tsM9 + " c\n" + tsM + " d\n"},
			want:    []line{{1, tsM, "a"}, {2, tsP, "b"}, {3, tsM9, "c"}, {4, tsM, "d"}},
		},
		"resumed before a line stamped before the cursor's": {
			streams: []string{tsM9 + " c9\n" + tsP + " pruned\n" + tsM + " metric 10\n" + tsC + " c10\n"},
			from:    backend.LogCursor{Seq: 7, Time: mustTime(t, tsP), Line: "pruned"},
			want:    []line{{8, tsM, "metric 10"}, {9, tsC, "c10"}},
		},
		"resumed after a gap record, then reopened": {
			streams: []string{ts2 + " old\n" + tsLater + " new\n!", ts2 + " old\n" + tsLater + " new\n" + tsLater2 + " newer\n"},
			from:    backend.LogCursor{Seq: 3, Time: t2, Stream: backend.StreamGap, Line: backend.GapPrefix + "x"},
			want:    []line{{4, tsLater, "new"}, {5, tsLater2, "newer"}},
		},
		"no timestamp": {
			streams: []string{"plain line\n\n" + ts1 + " \n"},
			want:    []line{{1, now.Format(time.RFC3339Nano), "plain line"}, {2, now.Format(time.RFC3339Nano), ""}, {3, ts1, ""}},
		},
		"a line too long is cut": {
			streams: []string{ts1 + " " + long + "\n" + ts2 + " next\n"},
			want:    []line{{1, ts1, long[:maxLogLine-len(ts1)-1]}, {2, ts2, "next"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []line
			f := newLogFollower("r", tt.from, func() time.Time { return now }, func(l backend.LogLine) error {
				text := l.Line
				if l.Stream == backend.StreamGap {
					text = "gap " + text
				} else if l.Stream != "stdout" {
					t.Errorf("stream %q", l.Stream)
				}
				if l.Replica != "r" {
					t.Errorf("replica %q", l.Replica)
				}
				got = append(got, line{l.Seq, l.Time.Format(time.RFC3339Nano), text})
				return nil
			})
			for i, s := range tt.streams {
				var r io.Reader = strings.NewReader(s)
				if broken, ok := strings.CutSuffix(s, "!"); ok {
					r = io.MultiReader(strings.NewReader(broken), errReader{io.ErrUnexpectedEOF})
				}
				final := tt.final && i == len(tt.streams)-1
				err := f.consume(r, final)
				if strings.HasSuffix(s, "!") != (err != nil) {
					t.Fatalf("consume = %v", err)
				}
				if final {
					if err := f.finish(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

// Each read asks for the log from the second of the last line delivered.
func TestLogFollowerSinceTime(t *testing.T) {
	f := newLogFollower("r", backend.LogCursor{}, time.Now, func(backend.LogLine) error { return nil })
	if o := f.options(false, true); o.SinceTime != nil || !o.Follow || !o.Timestamps || o.Previous || o.Container != ContainerName {
		t.Fatalf("first read: %+v", o)
	}
	if err := f.consume(strings.NewReader("2026-05-01T10:00:01.75Z a\n"), false); err != nil {
		t.Fatal(err)
	}
	o := f.options(true, false)
	if o.SinceTime == nil || !o.SinceTime.Time.Equal(time.Date(2026, 5, 1, 10, 0, 1, 0, time.UTC)) || o.Follow || !o.Previous {
		t.Fatalf("after a line: %+v", o)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestLogFollowerCallbackError(t *testing.T) {
	stop := errors.New("stop")
	var seen []int64
	f := newLogFollower("r", backend.LogCursor{}, time.Now, func(l backend.LogLine) error {
		seen = append(seen, l.Seq)
		if l.Seq == 2 {
			return stop
		}
		return nil
	})
	err := f.consume(strings.NewReader("a\nb\nc\n"), false)
	var cbErr *callbackError
	if !errors.As(err, &cbErr) || !errors.Is(cbErr.err, stop) {
		t.Fatalf("consume = %v, want the callback's error", err)
	}
	if f.seq != 1 || !cmp.Equal(seen, []int64{1, 2}) {
		t.Errorf("delivered %d, saw %v", f.seq, seen)
	}
}

// fakeLogs makes the fake clientset serve text as every pod's log, or fail when text
// is empty, and records the options of each request.
type fakeLogs struct {
	mu       sync.Mutex
	text     string
	previous string // served for previous=true
	fail     bool
	opts     []corev1.PodLogOptions
}

func (f *fakeLogs) install(cs *fake.Clientset) {
	cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if o, ok := a.(k8stesting.GenericActionImpl).Value.(*corev1.PodLogOptions); ok {
			f.opts = append(f.opts, *o)
		}
		if f.fail {
			return true, nil, errors.New("dial tcp 10.0.0.1:10250: connect: connection refused")
		}
		if len(f.opts) > 0 && f.opts[len(f.opts)-1].Previous {
			return true, &runtime.Unknown{Raw: []byte(f.previous)}, nil
		}
		return true, &runtime.Unknown{Raw: []byte(f.text)}, nil
	})
}

func (f *fakeLogs) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.opts)
}

// follow runs FollowLogs in the background and returns what it delivered once it ends.
func follow(b *Backend, ref backend.GangRef, replica string, after int64) func(t *testing.T) ([]string, error) {
	type result struct {
		lines []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var lines []string
		err := b.FollowLogs(ctx, ref, replica, after, func(l backend.LogLine) error {
			lines = append(lines, fmt.Sprintf("%d %s", l.Seq, l.Line))
			return nil
		})
		done <- result{lines, err}
	}()
	return func(t *testing.T) ([]string, error) {
		t.Helper()
		r := <-done
		return r.lines, r.err
	}
}

func TestFollowLogs(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{text: "2026-05-01T10:00:00Z step 1\n2026-05-01T10:00:01Z step 2\n2026-05-01T10:00:02Z done"}
	logs.install(cs)
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)

	// Pending: nothing is read until the container runs.
	wait := follow(b, g.GangRef, "resnet-worker-0-a1", 1)
	time.Sleep(50 * time.Millisecond)
	if n := logs.requests(); n != 0 {
		t.Fatalf("%d log requests for a pending pod", n)
	}
	// Running: the stream ends (the container exited) before the pod is reported
	// finished; then it is.
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", runningStatus(), "node-a")
	testutil.Eventually(t, 10*time.Second, "a log request", func() bool { return logs.requests() > 0 })
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", failedStatus(1), "node-a")

	lines, err := wait(t)
	if err != nil {
		t.Fatalf("FollowLogs: %v", err)
	}
	if diff := cmp.Diff([]string{"2 step 2", "3 done"}, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, o := range logs.opts {
		if o.Container != "main" || !o.Follow || !o.Timestamps {
			t.Errorf("log options %+v", o)
		}
	}
}

// A finished pod whose log cannot be read leaves a gap record and a Warning event;
// while it runs, the log is retried.
func TestFollowLogsUnavailable(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{fail: true}
	logs.install(cs)
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")

	wait := follow(b, g.GangRef, "resnet-master-0-a1", 0)
	testutil.Eventually(t, 10*time.Second, "two log requests", func() bool { return logs.requests() >= 2 })
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{Phase: corev1.PodSucceeded}, "node-a")
	lines, err := wait(t)
	if err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "1 "+backend.GapPrefix+"the log of pod vision/resnet-master-0-a1 could not be read after it finished: ") ||
		!strings.Contains(lines[0], "connection refused") {
		t.Fatalf("FollowLogs = %q, %v; want nil and one gap record", lines, err)
	}
	ev, err := cs.CoreV1().Events("vision").Get(context.Background(), "resnet-master-0-a1.log-gap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != corev1.EventTypeWarning || ev.Reason != EventReasonLogGap || ev.InvolvedObject.Name != "resnet-master-0-a1" ||
		!strings.Contains(ev.Message, "connection refused") {
		t.Errorf("event %+v", ev)
	}
}

// A running pod whose log cannot be read is asked again after the backoff, or at
// once when that pod changes (here its container restarts), not at every change of
// the other pods of its gang: a 256-pod gang coming up changes hundreds of times.
func TestFollowLogsUnavailableWaitsForItsOwnPod(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{fail: true}
	logs.install(cs)
	b := newBackend(t, cs, WithPollInterval(time.Hour)) // the backoff never ends in this test
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.FollowLogs(ctx, g.GangRef, "resnet-master-0-a1", 0, func(backend.LogLine) error { return nil })
	}()
	testutil.Eventually(t, 10*time.Second, "the first log request", func() bool { return logs.requests() == 1 })
	for i := range 10 { // the other replicas come up and change
		st := runningStatus()
		st.Message = fmt.Sprint("change ", i)
		setPodStatus(t, cs, "vision", fmt.Sprintf("resnet-worker-%d-a1", i%2), st, "node-b")
	}
	testutil.Eventually(t, 10*time.Second, "the informer to see the last change", func() bool {
		p, err := b.cache.pod(ctx, "vision", "resnet-worker-1-a1")
		return err == nil && p != nil && p.Status.Message == "change 9"
	})
	time.Sleep(50 * time.Millisecond)
	if n := logs.requests(); n != 1 {
		t.Fatalf("%d log requests after 10 changes of other pods, want 1", n)
	}
	restarted := runningStatus()
	restarted.ContainerStatuses[0].RestartCount = 1
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", restarted, "node-a")
	testutil.Eventually(t, 10*time.Second, "a log request once the pod itself changed", func() bool { return logs.requests() > 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("FollowLogs = %v, want context.Canceled", err)
	}
}

func TestFollowLogsOfGoneReplicas(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	lines, err := follow(b, g.GangRef, "resnet-master-0-a1", 0)(t)
	if err != nil || len(lines) != 0 {
		t.Errorf("stopped replica: %v, %v; want nil and no lines", lines, err)
	}
	if _, err := follow(b, g.GangRef, "resnet-ghost-0-a1", 0)(t); err == nil || !strings.Contains(err.Error(), "no replica") {
		t.Errorf("replica not in the gang: %v", err)
	}
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a cleaned-up gang to be unknown", func() bool {
		_, err := follow(b, g.GangRef, "resnet-master-0-a1", 0)(t)
		return errors.Is(err, backend.ErrGangNotFound)
	})
}

// A worker that resumes on a pod whose container restarted reads the end of the
// previous run's log (previous=true, from the cursor's second) before the current one.
func TestFollowLogsAfterContainerRestart(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{
		previous: "2026-05-01T10:00:00.1Z a\n2026-05-01T10:00:00.2Z b\n2026-05-01T10:00:00.3Z c\n",
		text:     "2026-05-01T10:00:01.1Z d\n2026-05-01T10:00:01.2Z e\n",
	}
	logs.install(cs)
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	st := failedStatus(0)
	st.Phase = corev1.PodSucceeded
	st.ContainerStatuses[0].RestartCount = 1
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", st, "node-a")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var lines []string
	from := backend.LogCursor{Seq: 2, Time: time.Date(2026, 5, 1, 10, 0, 0, 200_000_000, time.UTC), Stream: "stdout", Line: "b"}
	err := b.FollowLogsFrom(ctx, g.GangRef, "resnet-master-0-a1", from, func(l backend.LogLine) error {
		lines = append(lines, fmt.Sprintf("%d %s", l.Seq, l.Line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3 c", "4 d", "5 e"}, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.opts) != 2 || !logs.opts[0].Previous || logs.opts[1].Previous || logs.opts[1].Follow {
		t.Fatalf("requests %+v: want the previous log, then the current one without follow", logs.opts)
	}
	for _, o := range logs.opts {
		if o.SinceTime == nil || !o.SinceTime.Time.Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)) || !o.Timestamps {
			t.Errorf("request %+v: want timestamps since the cursor's second", o)
		}
	}
}

// A kubelet on containerd stamps a container's stdout and stderr lines apart, so a line
// may follow one stamped after it: seen as rank 0's last metric line, written after
// its stderr line of the epoch before yet stamped before it, missing from the
// forwarded log of a job on real nodes. Every line is delivered once, in the log's
// order, through the followed stream that ends with the container and the drain after.
func TestFollowLogsLinesStampedOutOfOrder(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{text: "2026-05-01T10:00:09.3Z dlc:checkpoint step=288\n" +
		"2026-05-01T10:00:09.401Z pruned checkpoints at steps [256] (keeping 3)\n" +
		"2026-05-01T10:00:09.4Z dlc:metric epoch=10 step=320\n" +
		"2026-05-01T10:00:09.42Z dlc:checkpoint step=320\n" +
		"2026-05-01T10:00:09.41Z pruned checkpoints at steps [288] (keeping 3)\n"}
	logs.install(cs)
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")

	wait := follow(b, g.GangRef, "resnet-master-0-a1", 0)
	testutil.Eventually(t, 10*time.Second, "a log request", func() bool { return logs.requests() > 0 })
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{Phase: corev1.PodSucceeded}, "node-a")
	lines, err := wait(t)
	if err != nil {
		t.Fatalf("FollowLogs: %v", err)
	}
	want := []string{"1 dlc:checkpoint step=288", "2 pruned checkpoints at steps [256] (keeping 3)",
		"3 dlc:metric epoch=10 step=320", "4 dlc:checkpoint step=320", "5 pruned checkpoints at steps [288] (keeping 3)"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
