package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schemas"
)

// This file is the TrainingJob's clock for its two timeouts: spec.timeout bounds the
// run time, counted from the first launch with the time spent Queued left out, and
// spec.queueTimeout bounds the time spent Queued, in all. Both are measured from the
// phase transitions (workflow time), so they replay deterministically.

// jobClock adds up the time a job spent running and Queued.
type jobClock struct {
	// runSince is when the job last entered a run phase (nil when not in one); ran is
	// its run time before that.
	runSince *time.Time
	ran      time.Duration
	// queuedSince is when the job last entered Queued (nil when not Queued); queued is
	// its time Queued before that.
	queuedSince *time.Time
	queued      time.Duration
	// cancelQueueTimer cancels the running queue timer (nil when none runs).
	cancelQueueTimer workflow.CancelFunc
	// queueTimeout is the job's outcome once the queue timer fired and asked it to end.
	queueTimeout *jobOutcome
}

// runPhase reports whether time in phase counts against spec.timeout: from the first
// launch on, every phase but Queued (and the health check before an attempt).
func runPhase(phase schemas.JobPhase) bool {
	switch phase {
	case schemas.JobLaunching, schemas.JobRunning, schemas.JobRestarting:
		return true
	}
	return false
}

// clockTransition accounts for the job leaving prev for next at now, and starts or
// cancels the queue timer as the job enters or leaves Queued.
func (w *jobWorkflow) clockTransition(ctx workflow.Context, prev, next schemas.JobPhase, now time.Time) {
	c := &w.clock
	if c.runSince != nil && !runPhase(next) {
		c.ran += now.Sub(*c.runSince)
		c.runSince = nil
	} else if c.runSince == nil && runPhase(next) {
		c.runSince = &now
	}
	if prev == schemas.JobQueued && next != schemas.JobQueued {
		if c.queuedSince != nil {
			c.queued += now.Sub(*c.queuedSince)
			c.queuedSince = nil
		}
		if c.cancelQueueTimer != nil {
			c.cancelQueueTimer()
			c.cancelQueueTimer = nil
		}
	} else if prev != schemas.JobQueued && next == schemas.JobQueued {
		c.queuedSince = &now
		if d := w.in.Job.Spec.QueueTimeout.D(); d > 0 {
			w.startQueueTimer(ctx, max(d-c.queued, time.Millisecond))
		}
	}
}

// startQueueTimer asks the job to end with reason QueueTimeout when it is still Queued
// after left. The request goes through the stop channel, which every wait in Queued
// listens to; stopped then gives the QueueTimeout outcome.
func (w *jobWorkflow) startQueueTimer(ctx workflow.Context, left time.Duration) {
	tctx, cancel := workflow.WithCancel(ctx)
	w.clock.cancelQueueTimer = cancel
	workflow.Go(tctx, func(gctx workflow.Context) {
		if err := workflow.NewTimer(gctx, left).Get(gctx, nil); err != nil {
			return // cancelled: the job left Queued
		}
		if w.status.Phase == schemas.JobQueued && w.stopCh.SendAsync(true) {
			out := w.queueTimedOut(gctx)
			w.clock.queueTimeout = &out
		}
	})
}

// runTimeLeft is what is left of timeout d at now: d less the job's run time so far.
func (w *jobWorkflow) runTimeLeft(ctx workflow.Context, d time.Duration) time.Duration {
	now := workflow.Now(ctx)
	ran := w.clock.ran
	if w.clock.runSince != nil {
		ran += now.Sub(*w.clock.runSince)
	}
	return d - ran
}

// queueTimedOut is the outcome of a job that waited in Queued longer than its
// spec.queueTimeout, with the Launched condition saying so.
func (w *jobWorkflow) queueTimedOut(ctx workflow.Context) jobOutcome {
	msg := fmt.Sprintf("waited in Queued longer than its queueTimeout %s", w.in.Job.Spec.QueueTimeout.D())
	if w.status.Phase == schemas.JobQueued && w.status.Message != "" {
		msg += " (" + w.status.Reason + ": " + w.status.Message + ")"
	}
	w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionFalse, ReasonQueueTimeout, msg)
	return jobOutcome{schemas.JobFailed, ReasonQueueTimeout, msg}
}
