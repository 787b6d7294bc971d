package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

func testJob() schemas.TrainingJob {
	return schemas.TrainingJob{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindTrainingJob,
		Metadata:   schemas.ObjectMeta{Name: "wf", Workspace: "team"},
		Spec: schemas.TrainingJobSpec{
			Framework:  schemas.FrameworkPyTorch,
			Command:    []string{"train"},
			Roles:      map[string]schemas.RoleSpec{"worker": {Replicas: 2}},
			Checkpoint: &schemas.CheckpointSpec{URI: "s3://ckpt/wf"},
		},
	}
}

func replicas(phases ...schemas.ReplicaPhase) []schemas.ReplicaStatus {
	out := make([]schemas.ReplicaStatus, len(phases))
	for i, p := range phases {
		out[i] = schemas.ReplicaStatus{Name: backend.GangRef{Job: "wf"}.ReplicaName("worker", i), Role: "worker", Index: i, Phase: p}
	}
	return out
}

func code(c int32) *int32 { return new(c) }

// harness sets up a test workflow environment with every activity registered and the
// published events recorded.
type harness struct {
	env    *testsuite.TestWorkflowEnvironment
	phases []string
	ids    []string
	// forwardLogs, when set, plays the log forwarder.
	forwardLogs func(context.Context, activities.ForwardLogsInput) (activities.ForwardLogsResult, error)
	// forwardLogsAfter, when set, is how long the forwarder takes on the workflow clock.
	forwardLogsAfter time.Duration
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	h := &harness{env: s.NewTestWorkflowEnvironment()}
	workers.RegisterWorkflows(h.env)
	workers.RegisterActivities(h.env, &activities.JobActivities{})
	workers.RegisterQuotaActivities(h.env, &activities.QuotaActivities{})
	// The workspace has room: the quota admits every job at once.
	returnActivity(h.env, quotaActs.RequestQuota, map[string]any{"granted": true}, nil)
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, workflows.SignalQuotaRelease, mock.Anything).Return(nil)
	onActivityErr(h.env, jobActs.PublishEvents, func(_ context.Context, in activities.PublishEventsInput) error {
		for _, m := range in.Msgs {
			_, d, err := decodeEvent[events.JobPhaseData](m.Data)
			if err != nil {
				return err
			}
			h.phases = append(h.phases, d.Phase)
			h.ids = append(h.ids, m.ID)
		}
		return nil
	})
	onActivity(h.env, jobActs.ForwardLogs, func(ctx context.Context, in activities.ForwardLogsInput) (activities.ForwardLogsResult, error) {
		if h.forwardLogs != nil {
			return h.forwardLogs(ctx, in)
		}
		return activities.ForwardLogsResult{}, nil
	}).AfterFn(func() time.Duration { return h.forwardLogsAfter })
	returnActivityErr(h.env, jobActs.CleanupGang, nil)
	returnActivity(h.env, jobActs.LatestCheckpoint, "s3://ckpt/wf/000000000010", nil)
	return h
}

// watchSequence makes WatchGang return each state in turn, then, like the real
// activity, return the known state unchanged after MaxWait on the workflow clock.
func (h *harness) watchSequence(states ...[]schemas.ReplicaStatus) {
	for _, st := range states {
		returnActivity(h.env, jobActs.WatchGang, activities.WatchGangResult{Replicas: st}, nil).Once()
	}
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		return activities.WatchGangResult{Replicas: in.Known}, nil
	}).After(time.Minute)
}

// workflowResult checks that the workflow in env (what, in messages) completed
// without an error and returns its result.
func workflowResult[R any](t *testing.T, env *testsuite.TestWorkflowEnvironment, what string) R {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatalf("%s did not complete", what)
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("%s error: %v", what, err)
	}
	var res R
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkPhases checks the phases the job published, in order.
func (h *harness) checkPhases(t *testing.T, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, h.phases); diff != "" {
		t.Errorf("published phases (-want +got):\n%s", diff)
	}
}

func (h *harness) result(t *testing.T) schemas.JobStatus {
	t.Helper()
	return workflowResult[workflows.TrainingJobResult](t, h.env, "workflow").Status
}

func TestTrainingJobSucceeds(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	h.watchSequence(
		replicas(schemas.ReplicaRunning, schemas.ReplicaPending),
		replicas(schemas.ReplicaRunning, schemas.ReplicaRunning),
		replicas(schemas.ReplicaSucceeded, schemas.ReplicaRunning),
		replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded),
	)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)

	h.checkPhases(t, "Pending", "Launching", "Running", "Succeeded")
	if st.Phase != schemas.JobSucceeded || st.LastCheckpoint != "s3://ckpt/wf/000000000010" {
		t.Errorf("status = %s, checkpoint %q", st.Phase, st.LastCheckpoint)
	}
	var timeline []schemas.JobPhase
	for _, e := range st.Timeline {
		timeline = append(timeline, e.Phase)
	}
	if diff := cmp.Diff([]schemas.JobPhase{"Pending", "Launching", "Running", "Succeeded"}, timeline); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	seen := map[string]bool{}
	for _, id := range h.ids {
		if seen[id] {
			t.Errorf("duplicate message id %s", id)
		}
		seen[id] = true
	}
	for _, c := range []schemas.ConditionType{schemas.ConditionAccepted, schemas.ConditionLaunched, schemas.ConditionRunning, schemas.ConditionCompleted} {
		if cond := st.Condition(c); cond == nil || cond.Status != schemas.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", c, cond)
		}
	}
}

func TestTrainingJobFailsWithExitCode(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	failed := replicas(schemas.ReplicaFailed, schemas.ReplicaRunning)
	failed[0].ExitCode = code(3)
	h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning), failed)
	stopped := false
	onActivityErr(h.env, jobActs.StopGang, func(context.Context, backend.GangRef) error { stopped = true; return nil })
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)

	if st.Phase != schemas.JobFailed || st.ExitCode == nil || *st.ExitCode != 3 || st.Reason != "ReplicaFailed" {
		t.Errorf("status = %s/%s exit %v, want Failed/ReplicaFailed exit 3", st.Phase, st.Reason, st.ExitCode)
	}
	if !stopped {
		t.Error("the rest of the gang was not stopped")
	}
	h.checkPhases(t, "Pending", "Launching", "Running", "Failed")
}

func TestTrainingJobStop(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning))
	stopped := false
	onActivityErr(h.env, jobActs.StopGang, func(context.Context, backend.GangRef) error { stopped = true; return nil })

	var stopResult workflows.StopResult
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("stop rejected: %v", err) },
			OnAccept:   func() {},
			OnComplete: func(r any, _ error) { stopResult = r.(workflows.StopResult) },
		}, workflows.StopRequest{Reason: "user asked"})
	}, time.Minute)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)

	if st.Phase != schemas.JobStopped || st.Message != "user asked" {
		t.Errorf("status = %s %q, want Stopped", st.Phase, st.Message)
	}
	if stopResult.Phase != schemas.JobStopped {
		t.Errorf("stop update returned %q", stopResult.Phase)
	}
	if !stopped {
		t.Error("StopGang not called")
	}
	h.checkPhases(t, "Pending", "Launching", "Running", "Stopped")
}

func TestTrainingJobInvalidSpecFailsWithoutRetry(t *testing.T) {
	h := newHarness(t)
	calls := 0
	onActivity(h.env, jobActs.LaunchGang, func(context.Context, activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		calls++
		return activities.LaunchGangResult{}, temporal.NewNonRetryableApplicationError("no command", activities.ErrTypeInvalidSpec, nil)
	})
	returnActivityErr(h.env, jobActs.StopGang, nil)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobFailed || st.Reason != "LaunchFailed" || st.Message != "no command" || calls != 1 {
		t.Errorf("status = %s/%s %q after %d calls", st.Phase, st.Reason, st.Message, calls)
	}
}

func TestTrainingJobTimeout(t *testing.T) {
	h := newHarness(t)
	job := testJob()
	job.Spec.Timeout = schemas.Duration(time.Hour)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning))
	returnActivityErr(h.env, jobActs.StopGang, nil)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobFailed || st.Reason != "Timeout" {
		t.Errorf("status = %s/%s, want Failed/Timeout", st.Phase, st.Reason)
	}
}

// Replicas that finish before the first observation still pass the job through Running
// (change running-before-succeeded).
func TestTrainingJobFastReplicasPassThroughRunning(t *testing.T) {
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	h.watchSequence(replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	h.checkPhases(t, "Pending", "Launching", "Running", "Succeeded")
	if st.Phase != schemas.JobSucceeded {
		t.Errorf("phase %s", st.Phase)
	}
}

// TensorFlow's chief decides (frameworks.Outcome): the chief succeeding ends the
// job while the parameter server still runs, and the rest of the gang is stopped.
func TestTrainingJobTensorFlowChiefDecides(t *testing.T) {
	h := newHarness(t)
	job := testJob()
	job.Spec.Framework = schemas.FrameworkTensorFlow
	job.Spec.Roles = map[string]schemas.RoleSpec{"chief": {Replicas: 1}, "ps": {Replicas: 1}}
	rep := func(role string, p schemas.ReplicaPhase) schemas.ReplicaStatus {
		return schemas.ReplicaStatus{Name: "wf-" + role + "-0-a0", Role: role, Phase: p}
	}
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: []schemas.ReplicaStatus{rep("chief", schemas.ReplicaPending), rep("ps", schemas.ReplicaPending)}}, nil)
	h.watchSequence(
		[]schemas.ReplicaStatus{rep("chief", schemas.ReplicaRunning), rep("ps", schemas.ReplicaRunning)},
		[]schemas.ReplicaStatus{rep("chief", schemas.ReplicaSucceeded), rep("ps", schemas.ReplicaRunning)},
	)
	stopped := false
	onActivityErr(h.env, jobActs.StopGang, func(context.Context, backend.GangRef) error { stopped = true; return nil })
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Reason != "LeaderSucceeded" {
		t.Errorf("status %s/%s %q, want Succeeded/LeaderSucceeded", st.Phase, st.Reason, st.Message)
	}
	if !stopped {
		t.Error("the parameter server was not stopped")
	}
}

// Gang placement (change gang-placement): an attempt whose replicas are not all running
// within spec.resources.placementTimeout is released entirely and retried as a new
// attempt after a backoff, in Queued.
func TestTrainingJobPlacementTimeoutReleasesAndRetries(t *testing.T) {
	h := newHarness(t)
	job := testJob()
	job.Spec.Resources.PlacementTimeout = schemas.Duration(3 * time.Minute)
	pending := replicas(schemas.ReplicaPending, schemas.ReplicaPending)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: pending, PlacementTimeout: 3 * time.Minute}, nil)
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		switch {
		case in.Ref.Attempt == 0: // room for one replica only
			return activities.WatchGangResult{Replicas: replicas(schemas.ReplicaRunning, schemas.ReplicaPending)}, nil
		case in.Known[0].Phase == schemas.ReplicaPending:
			return activities.WatchGangResult{Replicas: replicas(schemas.ReplicaRunning, schemas.ReplicaRunning)}, nil
		default:
			return activities.WatchGangResult{Replicas: replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded)}, nil
		}
	}).After(30 * time.Second)
	var stops []int
	onActivityErr(h.env, jobActs.StopGang, func(_ context.Context, ref backend.GangRef) error { stops = append(stops, ref.Attempt); return nil })
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Attempt != 1 {
		t.Fatalf("status %s attempt %d (%s), want Succeeded on attempt 1", st.Phase, st.Attempt, st.Message)
	}
	h.checkPhases(t, "Pending", "Launching", "Queued", "Launching", "Running", "Succeeded")
	if st.Timeline[2].Reason != "PlacementTimeout" || !strings.Contains(st.Timeline[2].Message, "only 1 of 2 replicas were placed") {
		t.Errorf("queued entry %+v", st.Timeline[2])
	}
	if diff := cmp.Diff([]int{0}, stops); diff != "" {
		t.Errorf("stopped attempts (-want +got):\n%s", diff)
	}
}
