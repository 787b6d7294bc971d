package kube

import (
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// Log requests have a rate budget of their own. Every followed replica opens its
// pod's log through the API server, and opens it again when the stream ends or cannot
// be opened yet. With thousands of pods those opens would take the whole of the
// clientset's client-side budget (kube.ClientConfig: 50 requests a second), and the
// requests that launch, watch and stop gangs would queue behind them. The log
// followers wait for this limiter first, so they get at most its rate of the
// clientset's budget and never starve the rest.
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
		b.logLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		return nil
	}
}

// nextLogRetry is the wait after an attempt to open a running pod's log failed,
// given the last one.
func (b *Backend) nextLogRetry(last time.Duration) time.Duration {
	return min(2*last, max(10*b.poll, logRetryCap))
}
