package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

func spotJob(sf schemas.SpotFallback) schemas.TrainingJob {
	job := recoverableJob(0)
	job.Spec.Resources.Pool = schemas.PoolSpot
	job.Spec.Resources.SpotFallback = &sf
	return job
}

func launchPools(s *attemptScript) []schemas.Pool {
	var pools []schemas.Pool
	for _, l := range s.launches {
		pools = append(pools, l.Pool)
	}
	return pools
}

// A spot job whose pods are never scheduled falls back to public after afterWaiting,
// with no placement timeout: the first attempt is released, the next runs in public,
// the job succeeds with no restart, and the condition and the event say why.
func TestSpotFallbackAfterWaitingWithoutPlacementTimeout(t *testing.T) {
	h := newHarness(t)
	s := h.script(map[int][][]schemas.ReplicaStatus{
		1: {running(), succeeded()},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{
		Job: spotJob(schemas.SpotFallback{AfterWaiting: schemas.Duration(30 * time.Second)}),
	})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Restarts != 0 || st.Preemptions != 0 {
		t.Fatalf("%s, restarts %d, preemptions %d: %s", st.Phase, st.Restarts, st.Preemptions, st.Message)
	}
	if diff := cmp.Diff([]schemas.Pool{"spot", "public"}, launchPools(s)); diff != "" {
		t.Errorf("pools of the attempts (-want +got):\n%s", diff)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Launching", "Running", "Succeeded")
	c := st.Condition(schemas.ConditionSpotFallback)
	if c == nil || c.Status != schemas.ConditionTrue || c.Reason != "AfterWaiting" || !strings.Contains(c.Message, "waited 30s for spot capacity") {
		t.Errorf("SpotFallback condition %+v", c)
	}
	var queued *schemas.TimelineEntry
	for i := range st.Timeline {
		if st.Timeline[i].Phase == schemas.JobQueued {
			queued = &st.Timeline[i]
		}
	}
	if queued == nil || queued.Reason != "SpotFallback" {
		t.Errorf("timeline %+v, want Queued with reason SpotFallback", st.Timeline)
	}
	if a0 := st.Attempts[0]; a0.Outcome != schemas.JobQueued || a0.Pool != schemas.PoolSpot {
		t.Errorf("attempt 0 %+v", a0)
	}
	// The fallback came after 30s of waiting, not before.
	if wait := queued.Time.Sub(st.Attempts[0].StartTime); wait < 30*time.Second || wait > 32*time.Second {
		t.Errorf("fell back after %s, want 30s", wait)
	}
}

// A spot gang that does not fit (the backend answers Unschedulable, so the job waits
// Queued without pods) falls back to public after afterWaiting as well.
func TestSpotFallbackAfterWaitingWhileUnschedulable(t *testing.T) {
	h := newHarness(t)
	var pools []schemas.Pool
	onActivity(h.env, jobActs.LaunchGang, func(_ context.Context, in activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		pools = append(pools, in.Params.Pool)
		if in.Params.Pool == schemas.PoolSpot {
			return activities.LaunchGangResult{}, temporal.NewNonRetryableApplicationError("no spot node has room",
				activities.ErrTypeUnschedulable, errors.New("unschedulable"))
		}
		return activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil
	})
	h.watchSequence(running(), succeeded())
	returnActivityErr(h.env, jobActs.StopGang, nil)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{
		Job: spotJob(schemas.SpotFallback{AfterWaiting: schemas.Duration(time.Minute)}),
	})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Restarts != 0 {
		t.Fatalf("%s, restarts %d: %s", st.Phase, st.Restarts, st.Message)
	}
	if pools[len(pools)-1] != schemas.PoolPublic || !slices.Contains(pools, schemas.PoolSpot) {
		t.Errorf("pools launched %v, want spot tries then public", pools)
	}
	if c := st.Condition(schemas.ConditionSpotFallback); c == nil || c.Reason != "AfterWaiting" || !strings.Contains(c.Message, "no spot node has room") {
		t.Errorf("SpotFallback condition %+v", c)
	}
}

// Without spotFallback a spot job whose pods are never scheduled keeps waiting in
// spot (its pool's placement timeout aside).
func TestSpotWithoutFallbackKeepsWaiting(t *testing.T) {
	h := newHarness(t)
	job := recoverableJob(0)
	job.Spec.Resources.Pool = schemas.PoolSpot
	s := h.script(nil)
	h.env.RegisterDelayedCallback(func() { h.env.CancelWorkflow() }, 20*time.Minute)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	if len(s.launches) == 0 {
		t.Fatal("never launched")
	}
	for _, p := range launchPools(s) {
		if p != schemas.PoolSpot {
			t.Errorf("pools launched %v, want spot only", launchPools(s))
		}
	}
}

// The afterPreemptions-th preemption moves the job to public, with the condition and a
// SpotFallback status event.
func TestSpotFallbackAfterPreemptionsSetsCondition(t *testing.T) {
	h := newHarness(t)
	s := h.script(map[int][][]schemas.ReplicaStatus{
		0: {running(), failedReplica(schemas.FailurePreempted, 137, "spot-1")},
		1: {running(), failedReplica(schemas.FailurePreempted, 137, "spot-2")},
		2: {running(), succeeded()},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{
		Job: spotJob(schemas.SpotFallback{AfterPreemptions: 2, AfterWaiting: schemas.Duration(time.Hour)}),
	})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Preemptions != 2 || st.Restarts != 0 {
		t.Fatalf("%s, preemptions %d, restarts %d", st.Phase, st.Preemptions, st.Restarts)
	}
	if diff := cmp.Diff([]schemas.Pool{"spot", "spot", "public"}, launchPools(s)); diff != "" {
		t.Errorf("pools of the attempts (-want +got):\n%s", diff)
	}
	if c := st.Condition(schemas.ConditionSpotFallback); c == nil || c.Reason != "AfterPreemptions" {
		t.Errorf("SpotFallback condition %+v", c)
	}
	found := false
	for _, e := range st.Timeline {
		found = found || (e.Phase == schemas.JobRestarting && e.Reason == "SpotFallback")
	}
	if !found {
		t.Errorf("timeline %+v, want a Restarting entry with reason SpotFallback", st.Timeline)
	}
}
