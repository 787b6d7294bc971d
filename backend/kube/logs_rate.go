package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/opendlc/opendlc/backend"
)

// Log requests have a rate budget of their own. Every followed replica opens its
// pod's log through the API server, and opens it again when the stream ends or cannot
// be opened yet. With thousands of pods those opens would take the whole of the
// clientset's client-side budget (kube.ClientConfig: 50 requests a second), and the
// requests that launch, watch and stop gangs would queue behind them. A log
// follower takes a token of this budget before it opens a log, so the followers get
// at most its rate of the clientset's budget and never starve the rest. A follower
// that finds none left does not queue for one: it tries again after a random wait of
// one to two poll intervals (or when its pod changes). A queue of reservations (the
// limiter's Wait) stalled with 10,000 followers: in the full-size scale run every
// follower was still waiting in it minutes later and no log was opened
// (docs/performance.md, the full-size run).
const (
	// DefaultLogRequestQPS and DefaultLogRequestBurst are the log followers' rate:
	// 10,000 pods' logs are all open within about ten minutes of their start.
	DefaultLogRequestQPS   = 20
	DefaultLogRequestBurst = 40
	// logRetryCap bounds the wait between attempts to open the log of a running pod
	// that cannot be read (its kubelet is unreachable, or a test node has no log):
	// the wait doubles from the poll interval up to this.
	logRetryCap = 30 * time.Second
)

// WithLogRequestRate sets the rate (requests a second, and burst) at which the log
// followers may open pod logs. Default DefaultLogRequestQPS, DefaultLogRequestBurst.
func WithLogRequestRate(qps float32, burst int) Option {
	return func(b *Backend) error {
		if qps <= 0 || burst < 1 {
			return fmt.Errorf("kube: log request rate %v a second, burst %d: both must be positive", qps, burst)
		}
		b.logLimiter = flowcontrol.NewTokenBucketPassiveRateLimiter(qps, burst)
		return nil
	}
}

// waitLogBudget waits before a follower that found no budget left tries again:
// logBudgetRetry, or until its running pod changes.
func (b *Backend) waitLogBudget(ctx context.Context, ns string, ref backend.GangRef, name string, restarts int32, finished bool) error {
	if finished {
		return b.wait(ctx, nil, b.logBudgetRetry())
	}
	return b.waitPodEnds(ctx, ns, ref, name, restarts, b.logBudgetRetry())
}

// logBudgetRetry is a random wait of one to two poll intervals, so that the followers
// waiting for budget do not all ask at once.
func (b *Backend) logBudgetRetry() time.Duration {
	return b.poll + rand.N(b.poll)
}

// nextLogRetry is the wait after an attempt to open a running pod's log failed,
// given the last one.
func (b *Backend) nextLogRetry(last time.Duration) time.Duration {
	return min(2*last, max(10*b.poll, logRetryCap))
}
