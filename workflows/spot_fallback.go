package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Spot fallback (spec.resources.spotFallback): a spot job moves to the public pool
// after afterPreemptions preemptions, or once it has waited afterWaiting for spot
// capacity without every replica being scheduled on a node — on its first launch as
// after a preemption. The wait is a workflow timer that runs while an attempt in the
// spot pool is Queued (the gang does not fit yet) or Launching (not every pod is
// placed); when it fires the attempt is released and the next one, launched at once,
// runs in the public pool. A fallback is neither a restart nor a preemption: it adds
// the SpotFallback condition and a Queued status event with reason SpotFallback.

// spotFallbackWaitingLabel names the afterWaiting field in messages.
const spotFallbackWaitingLabel = "spotFallback.afterWaiting"

// fellBack reports whether the job has fallen back to the public pool.
func (w *jobWorkflow) fellBack() bool {
	c := w.status.Condition(schemas.ConditionSpotFallback)
	return c != nil && c.Status == schemas.ConditionTrue
}

// notePreemptionFallback records, once, that the job falls back to public because of
// its preemptions (pool decided so for the attempt being planned): the SpotFallback
// condition, and a status event with reason SpotFallback in the phase the job is in
// (Restarting).
func (w *jobWorkflow) notePreemptionFallback(ctx workflow.Context) {
	sf := w.in.Job.Spec.Resources.SpotFallback
	if w.fellBack() || sf == nil || sf.AfterPreemptions == 0 {
		return
	}
	msg := fmt.Sprintf("preempted %d times (spotFallback.afterPreemptions %d): the next attempts run in the public pool",
		w.status.Preemptions, sf.AfterPreemptions)
	w.setCondition(ctx, schemas.ConditionSpotFallback, schemas.ConditionTrue, ReasonAfterPreemptions, msg)
	w.transition(ctx, jobOutcome{w.status.Phase, ReasonSpotFallback, msg})
}

// startSpotTimer starts the afterWaiting timer of an attempt about to launch in the
// spot pool: what is left of the wait that began when the job last started waiting for
// spot capacity (now, unless a previous attempt's wait goes on). a.spotTimer is nil
// when none applies; the returned function cancels it, at the attempt's end.
func (a *attempt) startSpotTimer(ctx workflow.Context) func() {
	w := a.w
	sf := w.in.Job.Spec.Resources.SpotFallback
	a.spotTimer = nil
	if a.plan.pool != schemas.PoolSpot || sf == nil || sf.AfterWaiting.D() <= 0 {
		return func() {}
	}
	now := workflow.Now(ctx)
	if w.spotWaitSince == nil {
		w.spotWaitSince = &now
	}
	left := max(sf.AfterWaiting.D()-now.Sub(*w.spotWaitSince), time.Millisecond)
	tctx, cancel := workflow.WithCancel(ctx)
	a.spotTimer = workflow.NewTimer(tctx, left)
	return func() {
		cancel()
		a.spotTimer = nil
	}
}

// spotWaitOver reports whether the attempt's afterWaiting timer has fired.
func (a *attempt) spotWaitOver() bool {
	return a.spotTimer != nil && a.spotTimer.IsReady()
}

// spotPlaced is called once every replica of the attempt is on a node: the wait for
// spot capacity is over, and its timer no longer applies.
func (a *attempt) spotPlaced() {
	if a.spotTimer != nil {
		a.spotTimer = nil
		a.w.spotWaitSince = nil
	}
}

// spotFallbackOutcome is the outcome of an attempt whose afterWaiting timer fired
// before it was placed (reason SpotFallback, no phase).
func (w *jobWorkflow) spotFallbackOutcome() jobOutcome {
	d := w.in.Job.Spec.Resources.SpotFallback.AfterWaiting.D()
	msg := fmt.Sprintf("waited %s for spot capacity (%s %s)", d, spotFallbackWaitingLabel, d)
	if reps := w.status.Replicas; len(reps) > 0 {
		msg += fmt.Sprintf(": %d of %d replicas placed", placedCount(reps), len(reps))
	} else if w.status.Phase == schemas.JobQueued && w.status.Message != "" {
		msg += ": " + w.status.Message
	}
	return jobOutcome{reason: ReasonSpotFallback, message: msg}
}

// fallBackToPublic releases the attempt that waited too long for spot capacity and
// records the fallback: the SpotFallback condition and a Queued status event with
// reason SpotFallback. The next attempt, planned at once, runs in the public pool; the
// fallback counts as neither a restart nor a preemption.
func (w *jobWorkflow) fallBackToPublic(ctx workflow.Context, ref backend.GangRef, out jobOutcome) {
	rec := w.currentAttempt()
	rec.Outcome, rec.Message = schemas.JobQueued, out.message
	w.cleanup(ctx, ref)
	w.spotWaitSince = nil
	msg := out.message + "; relaunching in the public pool"
	w.setCondition(ctx, schemas.ConditionSpotFallback, schemas.ConditionTrue, ReasonAfterWaiting, msg)
	w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonSpotFallback, msg})
}
