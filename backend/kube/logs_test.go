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
	corev1 "k8s.io/api/core/v1"
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
	const ts1, ts2, ts3 = "2026-05-01T10:00:00.000000001Z", "2026-05-01T10:00:01Z", "2026-05-01T10:00:02.5+08:00"
	long := strings.Repeat("x", maxLogLine+10)
	tests := map[string]struct {
		// streams are successive reads of the same log, each from its start; a stream
		// ending in "!" breaks there (an error) instead of ending cleanly.
		streams  []string
		afterSeq int64
		flush    bool
		want     []line
	}{
		"from the start": {
			streams: []string{ts1 + " epoch 1\n" + ts2 + " epoch 2\n"},
			want:    []line{{1, ts1, "epoch 1"}, {2, ts2, "epoch 2"}},
		},
		"after a sequence number": {
			streams:  []string{ts1 + " a\n" + ts2 + " b\n" + ts2 + " c\n"},
			afterSeq: 2,
			want:     []line{{3, ts2, "c"}},
		},
		"reopened after a break": {
			streams: []string{ts1 + " a\n" + ts2 + " b\n" + ts2 + " par!", ts1 + " a\n" + ts2 + " b\n" + ts2 + " partial\n" + ts3 + " d\n"},
			want:    []line{{1, ts1, "a"}, {2, ts2, "b"}, {3, ts2, "partial"}, {4, "2026-05-01T02:00:02.5Z", "d"}},
		},
		"resumed by a new follower": {
			streams:  []string{ts1 + " a\n" + ts2 + " b\n", ts1 + " a\n" + ts2 + " b\n" + ts3 + " c\n"},
			afterSeq: 1,
			want:     []line{{2, ts2, "b"}, {3, "2026-05-01T02:00:02.5Z", "c"}},
		},
		"unterminated last line of a finished log": {
			streams: []string{ts1 + " a\n" + ts2 + " done"},
			flush:   true,
			want:    []line{{1, ts1, "a"}, {2, ts2, "done"}},
		},
		"unterminated last line of a broken stream is not delivered": {
			streams: []string{ts1 + " a\n" + ts2 + " do!"},
			want:    []line{{1, ts1, "a"}},
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
			f := &logFollower{replica: "r", delivered: tt.afterSeq, now: func() time.Time { return now },
				fn: func(l backend.LogLine) error {
					if l.Replica != "r" || l.Stream != "stdout" {
						t.Errorf("replica %q stream %q", l.Replica, l.Stream)
					}
					got = append(got, line{l.Seq, l.Time.Format(time.RFC3339Nano), l.Line})
					return nil
				}}
			for _, s := range tt.streams {
				var r io.Reader = strings.NewReader(s)
				if broken, ok := strings.CutSuffix(s, "!"); ok {
					r = io.MultiReader(strings.NewReader(broken), errReader{io.ErrUnexpectedEOF})
				}
				err := f.consume(r)
				if strings.HasSuffix(s, "!") != (err != nil) {
					t.Fatalf("consume = %v", err)
				}
			}
			if tt.flush {
				if err := f.flush(); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestLogFollowerCallbackError(t *testing.T) {
	stop := errors.New("stop")
	var seen []int64
	f := &logFollower{now: time.Now, fn: func(l backend.LogLine) error {
		seen = append(seen, l.Seq)
		if l.Seq == 2 {
			return stop
		}
		return nil
	}}
	err := f.consume(strings.NewReader("a\nb\nc\n"))
	var cbErr *callbackError
	if !errors.As(err, &cbErr) || !errors.Is(cbErr.err, stop) {
		t.Fatalf("consume = %v, want the callback's error", err)
	}
	if f.delivered != 1 || !cmp.Equal(seen, []int64{1, 2}) {
		t.Errorf("delivered %d, saw %v", f.delivered, seen)
	}
}

// fakeLogs makes the fake clientset serve text as every pod's log, or fail when text
// is empty, and records the options of each request.
type fakeLogs struct {
	mu   sync.Mutex
	text string
	fail bool
	opts []corev1.PodLogOptions
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
	eventually(t, "a log request", func() bool { return logs.requests() > 0 })
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

// Pods of kwok nodes have no kubelet: their log cannot be read, and FollowLogs ends
// when they finish.
func TestFollowLogsUnavailable(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{fail: true}
	logs.install(cs)
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")

	wait := follow(b, g.GangRef, "resnet-master-0-a1", 0)
	eventually(t, "two log requests", func() bool { return logs.requests() >= 2 })
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{Phase: corev1.PodSucceeded}, "node-a")
	lines, err := wait(t)
	if err != nil || len(lines) != 0 {
		t.Fatalf("FollowLogs = %v, %v; want nil and no lines", lines, err)
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
	eventually(t, "a cleaned-up gang to be unknown", func() bool {
		_, err := follow(b, g.GangRef, "resnet-master-0-a1", 0)(t)
		return errors.Is(err, backend.ErrGangNotFound)
	})
}
