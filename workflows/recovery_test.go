package workflows_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// attemptScript drives the gang mocks per attempt: each attempt's WatchGang calls
// return its states in turn, then the last state after a minute of workflow time.
type attemptScript struct {
	mu       sync.Mutex
	states   map[int][][]schemas.ReplicaStatus
	calls    map[int]int
	launches []backend.GangParams
}

func (h *harness) script(states map[int][][]schemas.ReplicaStatus) *attemptScript {
	s := &attemptScript{states: states, calls: map[int]int{}}
	onActivity(h.env, jobActs.LaunchGang, func(_ context.Context, in activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.launches = append(s.launches, in.Params)
		return activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending),
			PlacementTimeout: in.Job.Spec.Resources.PlacementTimeout.D()}, nil
	})
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		seq := s.states[in.Ref.Attempt]
		i := s.calls[in.Ref.Attempt]
		s.calls[in.Ref.Attempt]++
		if i >= len(seq) {
			return activities.WatchGangResult{Replicas: in.Known}, nil
		}
		return activities.WatchGangResult{Replicas: seq[i]}, nil
	}).After(time.Second) // like the real watch, which waits for a change
	returnActivityErr(h.env, jobActs.StopGang, nil)
	return s
}

func failedReplica(class schemas.FailureClass, exit int32, node string) []schemas.ReplicaStatus {
	r := replicas(schemas.ReplicaFailed, schemas.ReplicaRunning)
	r[0].Reason, r[0].ExitCode, r[0].Node = class, new(exit), node
	r[1].Node = "node-ok"
	return r
}

func running() []schemas.ReplicaStatus {
	return replicas(schemas.ReplicaRunning, schemas.ReplicaRunning)
}

func succeeded() []schemas.ReplicaStatus {
	return replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded)
}

func recoverableJob(maxRestarts int32) schemas.TrainingJob {
	job := testJob()
	job.Spec.FaultTolerance.MaxRestarts = maxRestarts
	return job
}

// A replica killed by a signal on a node: the job restarts once, from the newest
// checkpoint, off that node, and succeeds; the restart and the attempt history are in
// status.
func TestRecoveryRestartsFromCheckpointOffTheFailedNode(t *testing.T) {
	h := newHarness(t)
	s := h.script(map[int][][]schemas.ReplicaStatus{
		0: {running(), failedReplica(schemas.FailureSignal, 137, "node-bad")},
		1: {running(), succeeded()},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: recoverableJob(2)})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Restarts != 1 || st.Preemptions != 0 {
		t.Fatalf("status %s restarts %d preemptions %d, want Succeeded after 1 restart", st.Phase, st.Restarts, st.Preemptions)
	}
	h.checkPhases(t, "Pending", "Launching", "Running", "Restarting", "Launching", "Running", "Succeeded")
	if len(s.launches) != 2 {
		t.Fatalf("%d launches, want 2", len(s.launches))
	}
	second := s.launches[1]
	if second.Ref.Attempt != 1 || second.ResumeFrom != "s3://ckpt/wf/000000000010" || !slices.Equal(second.ExcludeNodes, []string{"node-bad"}) {
		t.Errorf("second launch: attempt %d, resume %q, exclude %v", second.Ref.Attempt, second.ResumeFrom, second.ExcludeNodes)
	}
	if s.launches[0].ResumeFrom != "" {
		t.Errorf("first attempt resumed from %q, want a fresh start", s.launches[0].ResumeFrom)
	}
	if len(st.Attempts) != 2 {
		t.Fatalf("attempts %+v", st.Attempts)
	}
	a0 := st.Attempts[0]
	if a0.Class != schemas.FailureSignal || a0.Action != "Retry" || a0.Node != "node-bad" || a0.Outcome != schemas.JobRestarting ||
		a0.FaultTime == nil || a0.ReleasedTime == nil || a0.RunningTime == nil {
		t.Errorf("attempt 0 record %+v", a0)
	}
	if a1 := st.Attempts[1]; a1.ResumedFrom != "s3://ckpt/wf/000000000010" || a1.Outcome != schemas.JobSucceeded {
		t.Errorf("attempt 1 record %+v", a1)
	}
	if !slices.Equal(st.ExcludedNodes, []string{"node-bad"}) {
		t.Errorf("excluded nodes %v", st.ExcludedNodes)
	}
}

// Failures a restart cannot cure end the job at once, whatever maxRestarts says.
func TestRecoveryFailsFastOnNonRetryableFailures(t *testing.T) {
	for _, class := range []schemas.FailureClass{schemas.FailureImagePull, schemas.FailureConfig, schemas.FailureOOMKilled} {
		t.Run(string(class), func(t *testing.T) {
			h := newHarness(t)
			s := h.script(map[int][][]schemas.ReplicaStatus{0: {failedReplica(class, 1, "n")}})
			h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: recoverableJob(3)})
			st := h.result(t)
			if st.Phase != schemas.JobFailed || len(s.launches) != 1 || st.Restarts != 0 {
				t.Errorf("%s: %d launches, restarts %d, status %s", st.Phase, len(s.launches), st.Restarts, st.Message)
			}
			if !strings.Contains(st.Message, string(class)) || !strings.Contains(st.Message, "not retried") {
				t.Errorf("message %q does not say why", st.Message)
			}
		})
	}
}

// The restart budget runs out: the job fails and says so.
func TestRecoveryStopsAtMaxRestarts(t *testing.T) {
	h := newHarness(t)
	s := h.script(map[int][][]schemas.ReplicaStatus{
		0: {failedReplica(schemas.FailureError, 1, "a")},
		1: {failedReplica(schemas.FailureError, 1, "a")},
		2: {failedReplica(schemas.FailureError, 1, "a")},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: recoverableJob(2)})
	st := h.result(t)
	if st.Phase != schemas.JobFailed || st.Restarts != 2 || len(s.launches) != 3 {
		t.Fatalf("%s after %d restarts and %d launches, want Failed after 2 and 3", st.Phase, st.Restarts, len(s.launches))
	}
	if !strings.Contains(st.Message, "2 restarts used") {
		t.Errorf("message %q", st.Message)
	}
	if len(st.ExcludedNodes) != 0 {
		t.Errorf("an application error excluded nodes %v", st.ExcludedNodes)
	}
}

// Preemptions do not use up maxRestarts; a spot job falls back to public after the
// configured number of them.
func TestRecoveryCountsPreemptionsApartAndFallsBackToPublic(t *testing.T) {
	h := newHarness(t)
	job := recoverableJob(0)
	job.Spec.Resources.Pool = schemas.PoolSpot
	job.Spec.Resources.SpotFallback = &schemas.SpotFallback{AfterPreemptions: 2}
	s := h.script(map[int][][]schemas.ReplicaStatus{
		0: {running(), failedReplica(schemas.FailurePreempted, 137, "spot-1")},
		1: {running(), failedReplica(schemas.FailureNodeLost, 137, "spot-2")},
		2: {running(), succeeded()},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Preemptions != 2 || st.Restarts != 0 {
		t.Fatalf("%s, preemptions %d, restarts %d", st.Phase, st.Preemptions, st.Restarts)
	}
	var pools []schemas.Pool
	for _, l := range s.launches {
		pools = append(pools, l.Pool)
	}
	if diff := cmp.Diff([]schemas.Pool{"spot", "spot", "public"}, pools); diff != "" {
		t.Errorf("pools of the attempts (-want +got):\n%s", diff)
	}
	if !slices.Equal(st.ExcludedNodes, []string{"spot-2"}) {
		t.Errorf("excluded %v, want only the lost node", st.ExcludedNodes)
	}
}

// A hang (the log forwarder saw no output for hangTimeout) restarts the attempt.
func TestRecoveryRestartsAHungAttempt(t *testing.T) {
	h := newHarness(t)
	job := recoverableJob(1)
	job.Spec.FaultTolerance.HangTimeout = schemas.Duration(time.Minute)
	forwards := 0
	h.forwardLogs = func(_ context.Context, in activities.ForwardLogsInput) (activities.ForwardLogsResult, error) {
		forwards++
		if in.HangTimeout != time.Minute {
			t.Errorf("forwarder hang timeout %s", in.HangTimeout)
		}
		if in.Ref.Attempt == 0 {
			return activities.ForwardLogsResult{Hung: true, Quiet: time.Minute}, nil
		}
		return activities.ForwardLogsResult{}, nil
	}
	h.script(map[int][][]schemas.ReplicaStatus{
		0: {running()},
		1: {running(), succeeded()},
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded || st.Restarts != 1 || st.Attempts[0].Class != schemas.FailureHang {
		t.Fatalf("%s restarts %d attempts %+v", st.Phase, st.Restarts, st.Attempts)
	}
}

// The log forwarder ending without a hang while the gang's watch is pending (it ends
// first when the replicas' output closes before the watch sees them exit) does not
// cancel the watch, whose answer decides the job.
func TestForwarderEndingKeepsTheWatch(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	cancelled := 0
	h.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		if info.ActivityType.Name == "WatchGang" {
			mu.Lock()
			cancelled++
			mu.Unlock()
		}
	})
	onActivity(h.env, jobActs.LaunchGang, func(context.Context, activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		return activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaRunning, schemas.ReplicaRunning)}, nil
	})
	// The replicas exit after the forwarder ended (it returns at once).
	returnActivity(h.env, jobActs.WatchGang, activities.WatchGangResult{Replicas: succeeded()}, nil).After(200 * time.Millisecond)
	job := testJob()
	job.Spec.FaultTolerance.HangTimeout = schemas.Duration(time.Minute) // the workflow waits on the forwarder
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s (%s)", st.Phase, st.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if cancelled != 0 {
		t.Errorf("the gang's watch was cancelled %d times when the forwarder ended", cancelled)
	}
}

// A failure rule on an exit code ends the job at once.
func TestRecoveryExitCodeRule(t *testing.T) {
	h := newHarness(t)
	job := recoverableJob(5)
	job.Spec.FaultTolerance.Rules = []schemas.FailureRule{{ExitCodes: []int32{42}, Action: schemas.ActionFail}}
	s := h.script(map[int][][]schemas.ReplicaStatus{0: {failedReplica(schemas.FailureError, 42, "n")}})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobFailed || len(s.launches) != 1 || !strings.Contains(st.Message, "rule 0") {
		t.Errorf("%s after %d launches: %q", st.Phase, len(s.launches), st.Message)
	}
}

// The last metric values the log forwarder saw are in the status.
func TestStatusHoldsTheLastMetrics(t *testing.T) {
	h := newHarness(t)
	h.forwardLogs = func(context.Context, activities.ForwardLogsInput) (activities.ForwardLogsResult, error) {
		return activities.ForwardLogsResult{Metrics: map[string]float64{"accuracy": 0.91}}, nil
	}
	h.script(map[int][][]schemas.ReplicaStatus{0: {running(), succeeded()}})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: recoverableJob(0)})
	if st := h.result(t); st.Metrics["accuracy"] != 0.91 {
		t.Errorf("metrics %v", st.Metrics)
	}
}

// A Ray job whose worker fails before the head reports running is Running once every
// replica has started (the head decides; a worker failure is tolerated): a placement
// timeout does not release it.
func TestRayJobRunsDespiteAnEarlyWorkerFailure(t *testing.T) {
	h := newHarness(t)
	job := testJob()
	job.Spec.Framework = schemas.FrameworkRay
	job.Spec.Roles = map[string]schemas.RoleSpec{"head": {Replicas: 1}, "worker": {Replicas: 1}}
	job.Spec.Resources.PlacementTimeout = schemas.Duration(5 * time.Minute)
	head := func(p schemas.ReplicaPhase) schemas.ReplicaStatus {
		return schemas.ReplicaStatus{Name: "wf-head-0-a0", Role: "head", Phase: p}
	}
	worker := schemas.ReplicaStatus{Name: "wf-worker-0-a0", Role: "worker", Phase: schemas.ReplicaFailed, ExitCode: code(3), Reason: schemas.FailureError}
	s := h.script(map[int][][]schemas.ReplicaStatus{
		0: {{head(schemas.ReplicaRunning), worker}},
	})
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		var view workflows.JobView
		if err := v.Get(&view); err != nil {
			t.Error(err)
			return
		}
		if view.Status.Phase != schemas.JobRunning || view.Status.Attempt != 0 {
			t.Errorf("after 10 minutes: %s, attempt %d (%s), want Running attempt 0", view.Status.Phase, view.Status.Attempt, view.Status.Message)
		}
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Error(err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, workflows.StopRequest{Reason: "done"})
	}, 10*time.Minute)
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	if st := h.result(t); st.Phase != schemas.JobStopped || len(s.launches) != 1 {
		t.Errorf("%s after %d launches, want Stopped after 1", st.Phase, len(s.launches))
	}
}

// A failure rule on a log line: the forwarder reports the rule's pattern matched, and
// the job fails at once though restarts are left.
func TestRecoveryLogPatternRule(t *testing.T) {
	h := newHarness(t)
	job := recoverableJob(5)
	job.Spec.FaultTolerance.Rules = []schemas.FailureRule{
		{ExitCodes: []int32{42}, Action: schemas.ActionRetry},
		{LogPattern: "CUDA error: an illegal memory access", Action: schemas.ActionFail},
	}
	h.forwardLogs = func(_ context.Context, in activities.ForwardLogsInput) (activities.ForwardLogsResult, error) {
		if len(in.LogPatterns) != 1 || in.LogPatterns[0] != "CUDA error: an illegal memory access" {
			t.Errorf("forwarder patterns %q", in.LogPatterns)
		}
		return activities.ForwardLogsResult{Matches: []activities.LogMatch{
			{Pattern: 0, Replica: "wf-worker-0-a0", Line: "RuntimeError: CUDA error: an illegal memory access"},
		}}, nil
	}
	s := h.script(map[int][][]schemas.ReplicaStatus{0: {failedReplica(schemas.FailureError, 1, "n")}})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
	st := h.result(t)
	if st.Phase != schemas.JobFailed || len(s.launches) != 1 || !strings.Contains(st.Message, "rule 1") {
		t.Errorf("%s after %d launches: %q", st.Phase, len(s.launches), st.Message)
	}
}
