package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schemas"
)

// Gang placement: what counts as placed, and what a job that can never fit is told.
const (
	// changePlacedWhenScheduled: an attempt is placed once every replica is scheduled
	// onto a node (its Node set), not once every replica runs; a slow image pull no
	// longer counts against the placement timeout.
	changePlacedWhenScheduled = "placed-when-scheduled"

	// reasonUnschedulable is the reason of a job Queued because its gang can never fit
	// the nodes it may use, even empty (activities.ErrTypeUnschedulable).
	reasonUnschedulable = "Unschedulable"
	// maxUnschedulableBackoff bounds the wait between launches of a gang that cannot
	// fit: the cluster has to change first, which takes minutes, and each try adds to
	// the job's history.
	maxUnschedulableBackoff = 5 * time.Minute
)

// attemptPlacementTimeout is the attempt's placement timeout: the one its launch
// recorded (the job's, else its pool's, else the backend default), or, for launches
// recorded before the launch result carried it, the job's own; zero for none.
func attemptPlacementTimeout(launched time.Duration, job *schemas.TrainingJob) time.Duration {
	if launched > 0 {
		return launched
	}
	return job.Spec.Resources.PlacementTimeout.D()
}

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

// placedOnNodes reports whether every replica of a launching attempt is scheduled, so
// the placement timeout no longer applies though containers may still be starting
// (pulling their image). Histories from before changePlacedWhenScheduled keep waiting
// for every replica to run.
func (w *jobWorkflow) placedOnNodes(ctx workflow.Context) bool {
	reps := w.status.Replicas
	if len(reps) == 0 || placedCount(reps) < len(reps) {
		return false
	}
	return workflow.GetVersion(ctx, changePlacedWhenScheduled, workflow.DefaultVersion, 1) >= 1
}

// notPlacedMessage says how many replicas were placed before the placement timeout,
// and why the first one that was not is waiting (the scheduler's message).
func (w *jobWorkflow) notPlacedMessage(timeout time.Duration) string {
	reps := w.status.Replicas
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
	if w.status.Phase == schemas.JobQueued && w.status.Reason == reasonUnschedulable && w.status.Message == msg {
		return
	}
	w.setCondition(ctx, schemas.ConditionSchedulable, schemas.ConditionFalse, reasonUnschedulable, msg)
	w.transition(ctx, jobOutcome{schemas.JobQueued, reasonUnschedulable, msg})
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
