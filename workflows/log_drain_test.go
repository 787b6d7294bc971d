package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// logDrainJob runs a job whose replicas both succeed at once and whose log forwarder
// ends forwarderTakes after it started, on the workflow clock, answering a metric; each
// LogProgress call answers the next of progress (the last one again once they run out).
// It checks that the job succeeded, and answers its status and how many times
// LogProgress was asked.
func logDrainJob(t *testing.T, forwarderTakes time.Duration, progress ...int64) (schemas.JobStatus, int) {
	t.Helper()
	h := newHarness(t)
	returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
	h.watchSequence(replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded))
	h.forwardLogsAfter = forwarderTakes
	h.forwardLogs = func(context.Context, activities.ForwardLogsInput) (activities.ForwardLogsResult, error) {
		return activities.ForwardLogsResult{Metrics: events.Metrics{"loss": 0.25}}, nil
	}
	asked := 0
	onActivity(h.env, jobActs.LogProgress, func(_ context.Context, in activities.LogProgressInput) (int64, error) {
		if len(in.Replicas) != 2 || in.Ref.Workspace != "team" || in.Ref.Job != "wf" {
			t.Errorf("LogProgress asked for %d replicas of %+v, want the 2 of team/wf", len(in.Replicas), in.Ref)
		}
		p := progress[min(asked, len(progress)-1)]
		asked++
		return p, nil
	})
	h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: testJob()})
	st := h.result(t)
	if st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s, want Succeeded", st.Phase)
	}
	return st, asked
}

// A finished job waits for a log forwarder that is still sending after the first
// 2-minute drain period (one taken over from a dead worker, catching up): it asks how
// far the forwarded log has come each period and waits on while that grows, so the
// forwarder's result (its metrics) reaches the job's status.
func TestLogDrainWaitsWhileTheForwarderSends(t *testing.T) {
	st, asked := logDrainJob(t, 5*time.Minute, 1000, 2000)
	if asked != 2 {
		t.Errorf("LogProgress asked %d times, want 2 (at 2 and 4 minutes; the forwarder ended at 5)", asked)
	}
	if st.Metrics["loss"] != 0.25 {
		t.Errorf("metrics %v: the forwarder's result was not waited for", st.Metrics)
	}
}

// A forwarder that sends nothing for a whole period is given up on: the job ends
// without its result, after two periods (the first reading has nothing to compare with).
func TestLogDrainGivesUpOnAForwarderThatSendsNothing(t *testing.T) {
	st, asked := logDrainJob(t, time.Hour, 1000)
	if asked != 2 {
		t.Errorf("LogProgress asked %d times, want 2", asked)
	}
	if len(st.Metrics) != 0 {
		t.Errorf("metrics %v: the stalled forwarder's result arrived, want the drain to give up first", st.Metrics)
	}
}

// A forwarder that keeps sending, slowly, is waited for at most an hour in all.
func TestLogDrainEndsAfterAnHour(t *testing.T) {
	grows := make([]int64, 100)
	for i := range grows {
		grows[i] = int64(i+1) * 10
	}
	st, asked := logDrainJob(t, 3*time.Hour, grows...)
	if asked != 30 {
		t.Errorf("LogProgress asked %d times, want 30 (every 2 minutes for an hour)", asked)
	}
	if len(st.Metrics) != 0 {
		t.Errorf("metrics %v, want the drain to give up before the forwarder ends", st.Metrics)
	}
}
