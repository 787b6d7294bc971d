package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Waits between launches of a gang that did not fit: doubling from the first to the
// last.
const (
	capacityBackoff    = 2 * time.Second
	maxCapacityBackoff = 30 * time.Second
)

// launchWhenItFits launches the gang, and while the backend answers that it does not
// fit yet (InsufficientResources: nothing was started), shows the job Queued with the
// backend's message ("waiting for 4 GPUs: 2 of 8 free") and launches again after a
// backoff, until it fits; then the job is Launching again. A gang that can never fit
// as the cluster is (Unschedulable) waits the same way, Queued with reason
// Unschedulable and the Schedulable condition False naming what is short, with a
// longer backoff. stopped is true when a stop request came while it waited.
func (a *attempt) launchWhenItFits(ctx workflow.Context, in activities.LaunchGangInput) (res activities.LaunchGangResult, stopped bool, err error) {
	w := a.w
	backoff := capacityBackoff
	launching := w.status.Message
	for {
		res, err = launchGang(ctx, in)
		errType := activities.ErrorType(err)
		if errType != activities.ErrTypeInsufficientResources && errType != activities.ErrTypeUnschedulable {
			if w.status.Phase == schemas.JobQueued {
				// It fits now: Launching again, as before the wait.
				w.transition(ctx, jobOutcome{schemas.JobLaunching, ReasonLaunching, launching})
			}
			if err == nil {
				w.markSchedulable(ctx)
			}
			return res, false, err
		}
		msg := rootMessage(err)
		maxBackoff := maxCapacityBackoff
		if errType == activities.ErrTypeUnschedulable {
			// It can never fit as the cluster is: say so, and look again now and then
			// (nodes may be added, uncordoned or released from quarantine).
			w.markUnschedulable(ctx, msg)
			maxBackoff = maxUnschedulableBackoff
		} else if w.status.Phase != schemas.JobQueued || w.status.Message != msg {
			w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonInsufficientResources, msg})
		}
		if w.waitUnlessStopped(ctx, backoff, a.spotTimer) || a.spotWaitOver() {
			return res, true, nil // stopped, or waited too long for spot capacity
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
