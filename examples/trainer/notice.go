package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// noticeWait bounds how long rank 0, once noticed, waits for the data-parallel exchange
// it is in (its peers finishing the epoch, or exiting on their own signals), and how long
// it waits for a notice of its own when a peer goes away first. A preemption signals every
// replica, but not at the same instant: rank 1 may be gone a moment before rank 0 is told.
// Waiting longer would eat into the grace period the final save needs.
const noticeWait = 5 * time.Second

// notice is how the process learns that it is being stopped: SIGTERM (Kubernetes deleting
// the pod for a preemption, a quota reclaim, a spot node going away, a user's stop) or
// SIGINT. By default the first signal cancels the run's context, so the trainer stops at
// once. Once rank 0 has taken the notice over (takeOver), the first signal only marks the
// notice: the training loop sees it at the next epoch boundary and saves a final
// checkpoint. A second signal always cancels the context: stop now.
type notice struct {
	mu       sync.Mutex
	cancel   context.CancelCauseFunc
	sig      os.Signal     // the first signal; nil until one arrives
	at       time.Time     // when it arrived
	c        chan struct{} // closed when the first signal arrives
	deferred bool          // takeOver was called before the first signal
}

func newNotice(cancel context.CancelCauseFunc) *notice {
	return &notice{cancel: cancel, c: make(chan struct{})}
}

// deliver records a signal. It is called from the signal-handling goroutine.
func (n *notice) deliver(sig os.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sig != nil {
		n.cancel(fmt.Errorf("stopped by a second signal, %s", signalName(sig)))
		return
	}
	n.sig, n.at = sig, time.Now()
	close(n.c)
	if !n.deferred {
		n.cancel(fmt.Errorf("stopped by signal %s", signalName(sig)))
	}
}

// takeOver makes the first signal a notice instead of a stop. It reports false when a
// signal came before it, in which case the context is already cancelled.
func (n *notice) takeOver() bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sig != nil {
		return false
	}
	n.deferred = true
	return true
}

// received is the first signal and when it came, or nil.
func (n *notice) received() (os.Signal, time.Time) {
	if n == nil {
		return nil, time.Time{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sig, n.at
}

// exitCode is 128+N for signal N, the shell's convention.
func exitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// signalName is the signal's conventional name, as the notice line carries it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}

// noticeTaken ends a run that took a notice.
type noticeTaken struct {
	sig  os.Signal
	step int64         // the step of the final checkpoint
	what string        // how it came to be: saved on the notice, or before it
	took time.Duration // from the signal to the checkpoint complete
}

func (e *noticeTaken) Error() string {
	return fmt.Sprintf("stopped by %s at step %d: %s (%s after the signal)",
		signalName(e.sig), e.step, e.what, e.took.Round(time.Millisecond))
}
