package testutil

import (
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
