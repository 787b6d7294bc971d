package workflows_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A retry of retrainDoc in which preprocess, train and evaluate had succeeded: they
// are not run again, their outputs and metrics reach better and promote, which run.
func TestPipelineRetryReusesSucceededSteps(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"promote": {took: time.Minute, phase: schemas.JobSucceeded},
	})
	acc := 0.91
	reused := &workflows.PipelineReuse{From: "retrain-old", Steps: []schemas.StepStatus{
		{Name: "preprocess", Phase: schemas.StepSucceeded, Job: "retrain-old-preprocess",
			Outputs: map[string]string{"job": "retrain-old-preprocess", "dataset": "s3://dlc/data/retrain-old"}},
		{Name: "train", Phase: schemas.StepSucceeded, Job: "retrain-old-train",
			Outputs: map[string]string{"job": "retrain-old-train", "checkpoint": "s3://dlc/ckpt/retrain-old/000000000100"},
			Metrics: map[string]float64{"accuracy": 0.87}},
		{Name: "evaluate", Phase: schemas.StepSucceeded, Job: "retrain-old-evaluate", Metrics: map[string]float64{"accuracy": acc}},
	}}
	obj, err := schemas.Decode([]byte(retrainDoc))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*schemas.Pipeline)
	values, _ := p.Spec.ResolveParams(map[string]string{"dataKey": "k"})
	h.env.ExecuteWorkflow(workflows.PipelineWorkflowName, workflows.PipelineInput{Pipeline: *p, Params: values, Reused: reused})
	st := workflowResult[workflows.PipelineResult](t, h.env, "pipeline").Status

	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", st.Phase, st.Message)
	}
	if diff := cmp.Diff([]string{"retrain-promote"}, h.startedNames()); diff != "" {
		t.Errorf("jobs started (-want +got):\n%s", diff)
	}
	for _, name := range []string{"preprocess", "train", "evaluate"} {
		s := st.Step(name)
		if s.Phase != schemas.StepSucceeded || s.Reason != workflows.ReasonReused || s.ReusedFrom != "retrain-old" || s.Job != "" {
			t.Errorf("%s = %+v, want Succeeded, reused from retrain-old, no job of its own", name, s)
		}
	}
	if got := h.startedJob("retrain-promote").Spec.Command; !cmp.Equal(got, []string{"promote", "s3://dlc/ckpt/retrain-old/000000000100"}) {
		t.Errorf("promote command %q, want the reused train's checkpoint", got)
	}
	if b := st.Step("better"); b.ConditionResult == nil || !*b.ConditionResult {
		t.Errorf("better = %+v, want true on the reused metric", b)
	}
}
