package workflows_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// exitDoc is train → publish, with two onExit steps: notify (the outcome) and, after
// it, cleanup.
const exitDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: ex, workspace: team}
spec:
  steps:
    - name: train
      job: {framework: custom, command: [t], roles: {worker: {replicas: 1}}, checkpoint: {uri: "s3://dlc/ckpt/ex"}}
    - name: publish
      dependsOn: [train]
      job: {framework: custom, command: [p], roles: {worker: {replicas: 1}}}
  onExit:
    - name: notify
      job:
        framework: custom
        command: [notify, "${pipeline.status}", "${pipeline.failedStep}", "${pipeline.message}", "${pipeline.name}"]
        roles: {worker: {replicas: 1}}
    - name: cleanup
      dependsOn: [notify]
      job: {framework: custom, command: [c], roles: {worker: {replicas: 1}}}
`

func TestPipelineOnExitRunsAfterAFailureWithTheOutcome(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"train": {took: time.Minute, phase: schemas.JobFailed, message: "exit code 1"},
	})
	st := h.run(t, exitDoc, nil)
	if st.Phase != schemas.PipelineFailed || st.Reason != workflows.ReasonStepFailed {
		t.Errorf("run %s/%s (%s), want Failed/StepFailed", st.Phase, st.Reason, st.Message)
	}
	want := []string{"train:Failed", "publish:Skipped", "notify:Succeeded", "cleanup:Succeeded"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ex-train", "ex-notify", "ex-cleanup"}, h.startedNames()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	wantCmd := []string{"notify", "Failed", "train", "step train failed: job ex-train failed: exit code 1", "ex"}
	if diff := cmp.Diff(wantCmd, h.startedJob("ex-notify").Spec.Command); diff != "" {
		t.Errorf("notify command (-want +got):\n%s", diff)
	}
	if n := st.Step("notify"); !n.OnExit || n.StartTime.Before(*st.Step("train").FinishTime) {
		t.Errorf("notify = %+v: not an onExit step run after train", n)
	}
}

func TestPipelineOnExitFailureFailsASucceededRun(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"notify": {took: time.Minute, phase: schemas.JobFailed, message: "webhook down"},
	})
	st := h.run(t, exitDoc, nil)
	if st.Phase != schemas.PipelineFailed || st.Reason != workflows.ReasonOnExitFailed {
		t.Errorf("run %s/%s (%s), want Failed/OnExitFailed", st.Phase, st.Reason, st.Message)
	}
	want := []string{"train:Succeeded", "publish:Succeeded", "notify:Failed", "cleanup:Skipped"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if got := h.startedJob("ex-notify").Spec.Command[1:3]; !cmp.Equal(got, []string{"Succeeded", ""}) {
		t.Errorf("notify got status and failed step %q", got)
	}
}

func TestPipelineOnExitRunsAfterAStop(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"train": {phase: schemas.JobSucceeded}, // runs until stopped
	})
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", noopUpdate(t), workflows.StopRequest{Reason: "bad data"})
	}, time.Hour)
	st := h.run(t, exitDoc, nil)
	if st.Phase != schemas.PipelineStopped {
		t.Errorf("run %s (%s), want Stopped", st.Phase, st.Message)
	}
	want := []string{"train:Cancelled", "publish:Skipped", "notify:Succeeded", "cleanup:Succeeded"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if got := h.startedJob("ex-notify").Spec.Command[1:4]; !cmp.Equal(got, []string{"Stopped", "", "bad data"}) {
		t.Errorf("notify got %q", got)
	}
}
