package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A gang the backend cannot fit yet (InsufficientResources: nothing started) leaves the
// job Queued with the backend's message, published once per message; the same attempt
// is launched again after a backoff until it fits, and the job goes on from Launching.
func TestTrainingJobWaitsQueuedUntilTheGangFits(t *testing.T) {
	h := newHarness(t)
	free := []int{1, 1, 2, 4} // GPUs free at each launch; the gang needs 3
	calls, attempts := 0, map[int]bool{}
	var launchTimes []time.Time
	onActivity(h.env, jobActs.LaunchGang, func(_ context.Context, in activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		attempts[in.Params.Ref.Attempt] = true
		launchTimes = append(launchTimes, h.env.Now())
		n := free[min(calls, len(free)-1)]
		calls++
		if n < 3 {
			return activities.LaunchGangResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("waiting for 3 GPUs: %d of 4 free", n), activities.ErrTypeInsufficientResources, nil)
		}
		return activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil
	})
	h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning), replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || calls != 4 || len(attempts) != 1 || !attempts[0] {
		t.Fatalf("status %s (%s) after %d launches of attempts %v; want Succeeded after 4 launches of attempt 0", st.Phase, st.Message, calls, attempts)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Queued", "Launching", "Running", "Succeeded")
	q1, q2 := st.Timeline[2], st.Timeline[3]
	if q1.Reason != "InsufficientResources" || q1.Message != "waiting for 3 GPUs: 1 of 4 free" || q2.Message != "waiting for 3 GPUs: 2 of 4 free" {
		t.Errorf("queued entries %+v, %+v", q1, q2)
	}
	// The waits back off: 2 s, 4 s, 8 s.
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if got := launchTimes[i+1].Sub(launchTimes[i]); got < want {
			t.Errorf("wait %d: %v, want at least %v", i, got, want)
		}
	}
}

// A job waiting Queued for room stops at once on a stop request, launching nothing.
func TestTrainingJobStopWhileWaitingForRoom(t *testing.T) {
	h := newHarness(t)
	onActivity(h.env, jobActs.LaunchGang, func(context.Context, activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		return activities.LaunchGangResult{}, temporal.NewNonRetryableApplicationError(
			"waiting for 3 GPUs: 0 of 4 free", activities.ErrTypeInsufficientResources, nil)
	})
	returnActivityErr(h.env, jobActs.StopGang, nil)
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("stop rejected: %v", err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, workflows.StopRequest{Reason: "no room"})
	}, time.Minute)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobStopped || st.Message != "no room" {
		t.Fatalf("status %s/%s: %s", st.Phase, st.Reason, st.Message)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Stopped")
}
