package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// reasonInsufficientResources is the reason of a job Queued because its gang does not
// fit in what the backend has free (the local backend's GPUs).
const reasonInsufficientResources = "InsufficientResources"

// Waits between launches of a gang that did not fit: doubling from the first to the
// last.
const (
	capacityBackoff    = 2 * time.Second
	maxCapacityBackoff = 30 * time.Second
)

// launchWhenItFits launches the gang, and while the backend answers that it does not
// fit yet (InsufficientResources: nothing was started), shows the job Queued with the
// backend's message ("waiting for 4 GPUs: 2 of 8 free") and launches again after a
// backoff, until it fits; then the job is Launching again. stopped is true when a stop request came while it waited.
func (w *jobWorkflow) launchWhenItFits(ctx workflow.Context, in activities.LaunchGangInput) (res activities.LaunchGangResult, stopped bool, err error) {
	backoff := capacityBackoff
	launching := w.status.Message
	for {
		res, err = launchGang(ctx, in)
		if activities.ErrorType(err) != activities.ErrTypeInsufficientResources {
			if w.status.Phase == schemas.JobQueued {
				// It fits now: Launching again, as before the wait.
				w.transition(ctx, jobOutcome{schemas.JobLaunching, "Launching", launching})
			}
			return res, false, err
		}
		msg := rootMessage(err)
		if w.status.Phase != schemas.JobQueued || w.status.Message != msg {
			w.transition(ctx, jobOutcome{schemas.JobQueued, reasonInsufficientResources, msg})
		}
		if w.waitUnlessStopped(ctx, backoff) {
			return res, true, nil
		}
		backoff = min(2*backoff, maxCapacityBackoff)
	}
}
