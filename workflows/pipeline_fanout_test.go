package workflows_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

const fanOutItemsDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fo, workspace: team}
spec:
  steps:
    - name: eval
      withItems: [a, 7, {split: test, count: 2}, b]
      parallelism: 2
      outputs: {result: "s3://dlc/out/${item}"}
      job: {framework: custom, command: [sh, -c, 'echo "${item}" ${HOME}', x], args: ["${item}"], roles: {worker: {replicas: 1}}}
    - name: after
      dependsOn: [eval]
      job:
        framework: custom
        command: [report, "${steps.eval.outputs.jobs}", "${steps.eval.outputs.result}", "${item}"]
        roles: {worker: {replicas: 1}}
`

// A step fans out over four items with parallelism 2: four children <run>-<step>-<i>,
// at most two at once, each with its own item substituted and labelled with its index;
// the step's outputs are JSON lists in item order, and ${item} outside a fan-out step
// stays as written.
func TestPipelineFanOutRunsEveryItemTwoAtATime(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"fo-eval-0": {took: 3 * time.Minute, phase: schemas.JobSucceeded},
		"fo-eval-1": {took: time.Minute, phase: schemas.JobSucceeded},
		"fo-eval-2": {took: time.Minute, phase: schemas.JobSucceeded},
		"fo-eval-3": {took: time.Minute, phase: schemas.JobSucceeded},
	})
	st := h.run(t, fanOutItemsDoc, nil)
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}
	if diff := cmp.Diff([]string{"fo-eval-0", "fo-eval-1", "fo-eval-2", "fo-eval-3", "fo-after"}, h.startedNames()); diff != "" {
		t.Errorf("jobs started (-want +got):\n%s", diff)
	}
	if h.maxRunning != 2 {
		t.Errorf("at most %d jobs ran at once, want 2", h.maxRunning)
	}
	wantItems := []string{"a", "7", `{"count":2,"split":"test"}`, "b"}
	for k, item := range wantItems {
		j := h.startedJob(schemas.StepItemJobName("fo", "eval", k))
		if j == nil {
			t.Fatalf("child %d not started", k)
		}
		if got := j.Spec.Args; len(got) != 1 || got[0] != item {
			t.Errorf("child %d args %q, want [%q]", k, got, item)
		}
		// In the inline script the item goes through an environment variable.
		if !strings.Contains(j.Spec.Command[2], "${DLC_ITEM}") || !strings.Contains(j.Spec.Command[2], "${HOME}") {
			t.Errorf("child %d script %q", k, j.Spec.Command[2])
		}
		if j.Metadata.Labels[schemas.LabelPipelineItem] != strings.TrimPrefix(j.Metadata.Name, "fo-eval-") {
			t.Errorf("child %d labels %v", k, j.Metadata.Labels)
		}
	}
	s := st.Step("eval")
	if s.Phase != schemas.StepSucceeded || s.Job != "" || len(s.Children) != 4 {
		t.Fatalf("eval: %+v", s)
	}
	for k, c := range s.Children {
		if c.Index != k || c.Phase != schemas.StepSucceeded || c.Job != schemas.StepItemJobName("fo", "eval", k) {
			t.Errorf("child %d: %+v", k, c)
		}
	}
	wantJobs := `["fo-eval-0","fo-eval-1","fo-eval-2","fo-eval-3"]`
	wantResults := `["s3://dlc/out/a","s3://dlc/out/7","s3://dlc/out/{\"count\":2,\"split\":\"test\"}","s3://dlc/out/b"]`
	if s.Outputs[schemas.OutputJobs] != wantJobs || s.Outputs["result"] != wantResults || s.Metrics != nil {
		t.Errorf("eval outputs %v metrics %v", s.Outputs, s.Metrics)
	}
	after := h.startedJob("fo-after")
	if diff := cmp.Diff([]string{"report", wantJobs, wantResults, "${item}"}, after.Spec.Command); diff != "" {
		t.Errorf("after's command (-want +got):\n%s", diff)
	}
}

const fanOutParamDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fp, workspace: team}
spec:
  params: [{name: shards}]
  steps:
    - name: list
      outputs: {shards: "${params.shards}"}
      job: {framework: custom, command: [ls], roles: {worker: {replicas: 1}}}
    - name: each
      dependsOn: [list]
      withParam: "${steps.list.outputs.shards}"
      job: {framework: custom, command: [prep, "${item.key}", "${steps.list.outputs.job}"], roles: {worker: {replicas: 1}}}
`

// withParam fans out over an earlier step's output holding a JSON list, resolved when
// the step starts; ${item.<key>} is an object item's field. Without a parallelism every
// child runs at once.
func TestPipelineFanOutOverAnEarlierStepsOutput(t *testing.T) {
	h := newPipelineHarness(t, nil)
	st := h.run(t, fanOutParamDoc, map[string]string{"shards": `[{"key":"s1"},{"key":"s2"},{"key":"s3"}]`})
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}
	if h.maxRunning != 3 {
		t.Errorf("at most %d jobs ran at once, want 3", h.maxRunning)
	}
	for k, key := range []string{"s1", "s2", "s3"} {
		j := h.startedJob(schemas.StepItemJobName("fp", "each", k))
		if j == nil || cmp.Diff([]string{"prep", key, "fp-list"}, j.Spec.Command) != "" {
			t.Errorf("child %d: %+v", k, j)
		}
	}

	// An output that is not a JSON list fails the step, naming it.
	h = newPipelineHarness(t, nil)
	st = h.run(t, fanOutParamDoc, map[string]string{"shards": "s1,s2"})
	s := st.Step("each")
	if st.Phase != schemas.PipelineFailed || s.Phase != schemas.StepFailed || s.Reason != workflows.ReasonInvalidStep ||
		!strings.Contains(s.Message, `withParam ${steps.list.outputs.shards}: "s1,s2" is not a JSON list`) {
		t.Errorf("run %s; each %+v", st.Phase, s)
	}
}

const fanOutFailDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: ff, workspace: team}
spec:
  steps:
    - name: fan
      withItems: [a, b, c, d]
      parallelism: 3
      job: {framework: custom, command: [run, "${item}"], roles: {worker: {replicas: 1}}}
    - name: after
      dependsOn: [fan]
      job: {framework: custom, command: [a], roles: {worker: {replicas: 1}}}
`

// A failing child fails the step: its running siblings are stopped (Cancelled), the
// children not started are Skipped, and the run fails.
func TestPipelineFanOutFailingChildFailsTheStep(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"ff-fan-0": {}, // runs until stopped
		"ff-fan-1": {took: time.Minute, phase: schemas.JobFailed, message: "exit code 3"},
		"ff-fan-2": {},
	})
	st := h.run(t, fanOutFailDoc, nil)
	s := st.Step("fan")
	if st.Phase != schemas.PipelineFailed || s.Phase != schemas.StepFailed || s.Reason != workflows.ReasonChildFailed ||
		s.Message != "item 1: job ff-fan-1 failed: exit code 3" {
		t.Fatalf("run %s (%s); fan %+v", st.Phase, st.Message, s)
	}
	phases := []schemas.StepPhase{}
	for _, c := range s.Children {
		phases = append(phases, c.Phase)
	}
	want := []schemas.StepPhase{schemas.StepCancelled, schemas.StepFailed, schemas.StepCancelled, schemas.StepSkipped}
	if diff := cmp.Diff(want, phases); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	wantStopped := []string{workflows.JobWorkflowID("team", "ff-fan-0"), workflows.JobWorkflowID("team", "ff-fan-2")}
	slices.Sort(h.stopped) // the stops run at once
	if diff := cmp.Diff(wantStopped, h.stopped); diff != "" {
		t.Errorf("jobs stopped (-want +got):\n%s", diff)
	}
	if a := st.Step("after"); a.Phase != schemas.StepSkipped || h.startedJob("ff-after") != nil {
		t.Errorf("after: %+v", a)
	}
}

// Stopping the run while a fan-out step runs stops its running children (Cancelled),
// starts no more (Skipped), cancels the step and ends the run Stopped.
func TestPipelineFanOutStopCancelsTheChildren(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{"ff-fan-0": {}, "ff-fan-1": {}, "ff-fan-2": {}})
	var stopErr error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { stopErr = err },
			OnAccept:   func() {},
			OnComplete: func(_ any, err error) { stopErr = err },
		}, workflows.StopRequest{Reason: "enough"})
	}, time.Hour)
	st := h.run(t, fanOutFailDoc, nil)
	s := st.Step("fan")
	if stopErr != nil || st.Phase != schemas.PipelineStopped || s.Phase != schemas.StepCancelled || s.Reason != workflows.ReasonPipelineEnded {
		t.Fatalf("stop %v; run %s (%s); fan %+v", stopErr, st.Phase, st.Message, s)
	}
	var phases []schemas.StepPhase
	for _, c := range s.Children {
		phases = append(phases, c.Phase)
	}
	want := []schemas.StepPhase{schemas.StepCancelled, schemas.StepCancelled, schemas.StepCancelled, schemas.StepSkipped}
	if diff := cmp.Diff(want, phases); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	if len(h.stopped) != 3 {
		t.Errorf("jobs stopped: %v, want 3", h.stopped)
	}
}
