package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
)

// The log followers open logs at their own rate: with a budget of 2 opens (and next to
// no refill), three followers whose logs cannot be read make 2 requests between them,
// however often their pods change.
func TestLogOpensWaitForTheirOwnRate(t *testing.T) {
	cs := newClient()
	logs := &fakeLogs{fail: true}
	logs.install(cs)
	b := newBackend(t, cs, WithLogRequestRate(0.001, 2))
	budget := &countingLimiter{PassiveRateLimiter: b.logLimiter}
	b.logLimiter = budget
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	for _, r := range []string{"resnet-master-0-a1", "resnet-worker-0-a1", "resnet-worker-1-a1"} {
		setPodStatus(t, cs, "vision", r, runningStatus(), "node-a")
		go func() { done <- b.FollowLogs(ctx, g.GangRef, r, 0, func(backend.LogLine) error { return nil }) }()
	}
	testutil.Eventually(t, 10*time.Second, "two log requests", func() bool { return logs.requests() == 2 })
	asked := budget.refused.Load()
	testutil.Eventually(t, 10*time.Second, "the followers to ask for budget 20 times more", func() bool { return budget.refused.Load() >= asked+20 })
	if n := logs.requests(); n != 2 {
		t.Errorf("%d log requests, want the 2 the rate allows", n)
	}
	cancel()
	for range 3 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowLogs = %v, want context.Canceled", err)
		}
	}
}

// countingLimiter counts the tokens its limiter refused.
type countingLimiter struct {
	flowcontrol.PassiveRateLimiter
	refused atomic.Int64
}

func (l *countingLimiter) TryAccept() bool {
	ok := l.PassiveRateLimiter.TryAccept()
	if !ok {
		l.refused.Add(1)
	}
	return ok
}

func TestNextLogRetryDoublesUpToTheCap(t *testing.T) {
	for _, c := range []struct {
		poll, last, want time.Duration
	}{
		{100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		{100 * time.Millisecond, 20 * time.Second, 30 * time.Second},
		{time.Second, 16 * time.Second, 30 * time.Second},
		{10 * time.Second, 80 * time.Second, 100 * time.Second}, // never below 10 polls
	} {
		b := &Backend{poll: c.poll}
		if got := b.nextLogRetry(c.last); got != c.want {
			t.Errorf("poll %v, after %v: %v, want %v", c.poll, c.last, got, c.want)
		}
	}
}
