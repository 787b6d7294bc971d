package testutil

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the goroutine, as
// the real one does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls Eventually with r in a goroutine of its own (Fatalf ends it) and returns
// the failure, "" when it returned.
func run[C Condition](t *testing.T, timeout time.Duration, what string, cond C, interval ...time.Duration) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(r, timeout, what, cond, interval...)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if msg := run(t, time.Minute, "the third call", func() bool { n++; return n == 3 }, time.Millisecond); msg != "" {
		t.Errorf("failed: %s", msg)
	}
	if n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
	m := 0
	errLater := func() error {
		if m++; m < 2 {
			return errors.New("not before the second call")
		}
		return nil
	}
	if msg := run(t, time.Minute, "the second call", errLater, time.Millisecond); msg != "" {
		t.Errorf("failed: %s", msg)
	}
	if m != 2 {
		t.Errorf("%d calls, want 2", m)
	}
}

func TestEventuallyFailsNamingWhatWasAwaited(t *testing.T) {
	calls := 0
	msg := run(t, 0, "the moon to turn blue", func() bool { calls++; return false })
	if msg != "the moon to turn blue: not true within 0s" {
		t.Errorf("failure %q", msg)
	}
	if calls != 1 {
		t.Errorf("%d calls with no time at all, want 1", calls)
	}
	msg = run(t, 20*time.Millisecond, "the bucket", func() error { return errors.New("NoSuchBucket") }, time.Millisecond)
	if !strings.HasPrefix(msg, "the bucket: not true within 20ms: NoSuchBucket") {
		t.Errorf("failure %q, want it to name what was awaited and the last error", msg)
	}
}

func TestPollReturnsTheFailureInsteadOfFailing(t *testing.T) {
	n := 0
	if err := Poll(t.Context(), time.Minute, "the third call", func() bool { n++; return n == 3 }, time.Millisecond); err != nil || n != 3 {
		t.Errorf("Poll: %v after %d calls, want nil after 3", err, n)
	}
	err := Poll(t.Context(), 10*time.Millisecond, "the bucket", func() error { return errors.New("NoSuchBucket") }, time.Millisecond)
	if err == nil || !strings.HasPrefix(err.Error(), "the bucket: not true within 10ms: NoSuchBucket") {
		t.Errorf("Poll: %v, want it to name what was awaited and the last error", err)
	}
	// An ended context ends the wait at once, long before the timeout.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	start := time.Now()
	if err := Poll(ctx, time.Hour, "never", func() bool { calls++; return false }); err == nil || calls != 1 || time.Since(start) > time.Minute {
		t.Errorf("Poll with an ended context: %v after %d calls, want an error after 1", err, calls)
	}
}

// consistently calls Consistently with r as run calls Eventually.
func consistently[C Condition](t *testing.T, d time.Duration, what string, cond C) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Consistently(r, d, what, cond, time.Millisecond)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func TestConsistentlyChecksThroughoutAndFailsAtTheFirstBreak(t *testing.T) {
	calls := 0
	if msg := consistently(t, 20*time.Millisecond, "the pod stays", func() bool { calls++; return true }); msg != "" || calls < 2 {
		t.Errorf("failed %q after %d calls, want no failure and several calls", msg, calls)
	}
	calls = 0
	msg := consistently(t, time.Minute, "the pod stays", func() error {
		if calls++; calls == 3 {
			return errors.New("pod deleted")
		}
		return nil
	})
	if msg != "the pod stays: stopped being true within 1m0s: pod deleted" || calls != 3 {
		t.Errorf("failure %q after %d calls, want the third call's error", msg, calls)
	}
}
