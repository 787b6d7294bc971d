package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Gang placement: what counts as placed, and what a job that can never fit is told.
const (
	// maxUnschedulableBackoff bounds the wait between launches of a gang that cannot
	// fit: the cluster has to change first, which takes minutes, and each try adds to
	// the job's history.
	maxUnschedulableBackoff = 5 * time.Minute
)

// scheduled reports whether the replica has been placed on a node: it has a node, or it
// has left Pending (it ran).
func scheduled(r schemas.ReplicaStatus) bool {
	return r.Node != "" || (r.Phase != schemas.ReplicaPending && r.Phase != "")
}

// placedCount counts the replicas placed on a node.
func placedCount(reps []schemas.ReplicaStatus) int {
	n := 0
	for _, r := range reps {
		if scheduled(r) {
			n++
		}
	}
	return n
}

// allPlaced reports whether every replica of a launching attempt is scheduled, so
// the placement timeout no longer applies though containers may still be starting
// (pulling their image): a slow image pull does not count against the placement
// timeout.
func allPlaced(reps []schemas.ReplicaStatus) bool {
	return len(reps) > 0 && placedCount(reps) == len(reps)
}

// notPlacedMessage says how many replicas were placed before the placement timeout,
// and why the first one that was not is waiting (the scheduler's message).
func notPlacedMessage(reps []schemas.ReplicaStatus, timeout time.Duration) string {
	msg := fmt.Sprintf("only %d of %d replicas were placed within %s", placedCount(reps), len(reps), timeout)
	for _, r := range reps {
		if !scheduled(r) && r.Message != "" {
			return msg + fmt.Sprintf(" (%s: %s)", r.Name, r.Message)
		}
	}
	return msg
}

// markUnschedulable shows the job Queued because its gang can never fit, with the
// backend's message naming what is short, once per distinct message; the Schedulable
// condition turns False.
func (w *jobWorkflow) markUnschedulable(ctx workflow.Context, msg string) {
	if w.status.Phase == schemas.JobQueued && w.status.Reason == ReasonUnschedulable && w.status.Message == msg {
		return
	}
	w.setCondition(ctx, schemas.ConditionSchedulable, schemas.ConditionFalse, ReasonUnschedulable, msg)
	w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonUnschedulable, msg})
}

// markSchedulable turns the Schedulable condition True once a gang that could not fit
// has been launched; a job that never had it False does not get it.
func (w *jobWorkflow) markSchedulable(ctx workflow.Context) {
	for _, c := range w.status.Conditions {
		if c.Type == schemas.ConditionSchedulable && c.Status == schemas.ConditionFalse {
			w.setCondition(ctx, schemas.ConditionSchedulable, schemas.ConditionTrue, "Fits", "the gang fits the nodes it may use")
			return
		}
	}
}

// retryPlacement releases an attempt whose replicas were not all placed within the
// placement timeout (out, reason ReasonPlacementTimeout) and waits *backoff in Queued
// before the next attempt, doubling the backoff for the one after. It returns false
// with the job's outcome when a stop comes while it waits.
func (w *jobWorkflow) retryPlacement(ctx workflow.Context, ref backend.GangRef, out jobOutcome, backoff *time.Duration) (bool, jobOutcome) {
	w.currentAttempt().Outcome = schemas.JobQueued
	w.cleanup(ctx, ref)
	w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionFalse, ReasonPlacementTimeout, out.message)
	w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonPlacementTimeout, fmt.Sprintf("%s; retrying in %s", out.message, *backoff)})
	if w.waitUnlessStopped(ctx, *backoff, nil) {
		return false, w.stopped()
	}
	*backoff = min(2**backoff, maxPlacementBackoff)
	return true, jobOutcome{}
}
