package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// onNodes sets every replica's node, as the kubernetes backend reports a bound pod.
func onNodes(reps []schemas.ReplicaStatus) []schemas.ReplicaStatus {
	for i := range reps {
		reps[i].Node = "node-" + string(rune('a'+i))
	}
	return reps
}

// Placed means scheduled (change placed-when-scheduled): a gang whose pods are all
// bound to nodes but whose containers take longer than the placement timeout to start
// (a slow image pull) is not released; it runs in its first attempt. The timeout is the
// one the launch recorded (the backend's default here: the spec sets none).
func TestTrainingJobPlacedWhenScheduled(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{
		Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending), PlacementTimeout: 3 * time.Minute,
	}, nil)
	watches := 0
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		watches++
		switch {
		case watches <= 12: // scheduled, pulling the image for 6 minutes
			return activities.WatchGangResult{Replicas: onNodes(replicas(schemas.ReplicaPending, schemas.ReplicaPending))}, nil
		case in.Known[0].Phase == schemas.ReplicaPending:
			return activities.WatchGangResult{Replicas: onNodes(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning))}, nil
		default:
			return activities.WatchGangResult{Replicas: onNodes(replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))}, nil
		}
	}).After(30 * time.Second)
	stopped := false
	onActivityErr(h.env, jobActs.StopGang, func(context.Context, backend.GangRef) error { stopped = true; return nil })
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Attempt != 0 || stopped {
		t.Fatalf("status %s attempt %d stopped %v (%s), want Succeeded on attempt 0", st.Phase, st.Attempt, stopped, st.Message)
	}
	h.checkPhases(t, "Pending", "Launching", "Running", "Succeeded")
	if watches < 12 {
		t.Fatalf("%d watches: the image pull did not outlast the placement timeout", watches)
	}
}

// A job that sets no placement timeout gets the one its launch recorded (the pool's or
// the backend default): a gang only partly scheduled by then is released and queued,
// the message counting the replicas on nodes and saying why the first other waits.
func TestTrainingJobDefaultPlacementTimeout(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{
		Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending), PlacementTimeout: 2 * time.Minute,
	}, nil)
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		if in.Ref.Attempt == 0 { // one pod bound and pulling, the other unschedulable
			reps := replicas(schemas.ReplicaPending, schemas.ReplicaPending)
			reps[0].Node = "node-a"
			reps[1].Message = "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
			return activities.WatchGangResult{Replicas: reps}, nil
		}
		if in.Known[0].Phase == schemas.ReplicaPending {
			return activities.WatchGangResult{Replicas: onNodes(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning))}, nil
		}
		return activities.WatchGangResult{Replicas: onNodes(replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))}, nil
	}).After(30 * time.Second)
	returnActivityErr(h.env, jobActs.StopGang, nil)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Attempt != 1 {
		t.Fatalf("status %s attempt %d (%s), want Succeeded on attempt 1", st.Phase, st.Attempt, st.Message)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Launching", "Running", "Succeeded")
	q := st.Timeline[2]
	want := "only 1 of 2 replicas were placed within 2m0s (wf-worker-1-a0: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.)"
	if q.Reason != "PlacementTimeout" || !strings.HasPrefix(q.Message, want) {
		t.Errorf("queued entry %+v, want %q", q, want)
	}
}

// A gang that can never fit (Unschedulable) waits Queued, told once per message, with
// the Schedulable condition False; it is launched again with a backoff that grows past
// the capacity backoff's, and once it fits the condition turns True.
func TestTrainingJobUnschedulableWaitsQueuedWithACondition(t *testing.T) {
	h := newHarness(t)
	const msg = "cannot fit even on empty nodes: 4 replicas (worker: 4) need nvidia.com/gpu 8 each; the 3 nodes they may use in pool quota have room for 3"
	calls := 0
	var launchTimes []time.Time
	var condWhileQueued *schemas.Condition
	onActivity(h.env, jobActs.LaunchGang, func(context.Context, activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		launchTimes = append(launchTimes, h.env.Now())
		calls++
		if calls <= 6 {
			return activities.LaunchGangResult{}, temporal.NewNonRetryableApplicationError(msg, activities.ErrTypeUnschedulable, nil)
		}
		if v, err := h.env.QueryWorkflow(workflows.QueryStatus); err == nil {
			var view workflows.JobView
			if v.Get(&view) == nil {
				condWhileQueued = view.Status.Condition(schemas.ConditionSchedulable)
			}
		}
		return activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil
	})
	h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning), replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || calls != 7 {
		t.Fatalf("status %s (%s) after %d launches, want Succeeded after 7", st.Phase, st.Message, calls)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Launching", "Running", "Succeeded")
	if q := st.Timeline[2]; q.Reason != "Unschedulable" || q.Message != msg {
		t.Errorf("queued entry %+v", q)
	}
	if c := condWhileQueued; c == nil || c.Status != schemas.ConditionFalse || c.Reason != "Unschedulable" || c.Message != msg {
		t.Errorf("Schedulable condition while queued: %+v", c)
	}
	if c := st.Condition(schemas.ConditionSchedulable); c == nil || c.Status != schemas.ConditionTrue {
		t.Errorf("Schedulable condition at the end: %+v", c)
	}
	// The backoff doubles past the capacity backoff's 30 s cap: 2, 4, 8, 16, 32, 64 s.
	if got := launchTimes[6].Sub(launchTimes[5]); got < 64*time.Second {
		t.Errorf("sixth wait %v, want at least 64s", got)
	}
}
