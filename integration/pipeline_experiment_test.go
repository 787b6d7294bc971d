package integration

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/checkpoint"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// tuneAndTrainSpec is examples/pipeline/tune-and-train.yaml with the built trainer, in
// workspace ws, with two short trials.
func tuneAndTrainSpec(t *testing.T, ws string) string {
	t.Helper()
	data, err := os.ReadFile("../examples/pipeline/tune-and-train.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)
	for _, r := range [][2]string{
		{"workspace: default,", "workspace: " + ws + ","},
		{"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%q]", env.trainer)},
		{"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%q]", env.trainer)},
		{`{name: epochs, default: "3"`, `{name: epochs, default: "2"`},
		{"maxTrials: 4", "maxTrials: 2"},
		{`args: [--epochs, "6",`, `args: [--epochs, "3",`},
		{"s3://dlc/workspaces/default/checkpoints/${pipeline.name}-tune", "s3://dlc/workspaces/" + ws + "/checkpoints/${pipeline.name}-tune"},
		{"s3://dlc/workspaces/default/checkpoints/${pipeline.name}", "s3://dlc/workspaces/" + ws + "/checkpoints/${pipeline.name}"},
		{"s3://dlc/workspaces/default/features/", "s3://dlc/workspaces/" + ws + "/features/"},
	} {
		if !strings.Contains(spec, r[0]) {
			t.Fatalf("tune-and-train.yaml no longer contains %q", r[0])
		}
		spec = strings.Replace(spec, r[0], r[1], 1)
	}
	return spec
}

// An experiment step on the real stack: the pipeline's experiment tunes the example
// trainer (two trials that save checkpoints), and the next step trains with the best
// trial's parameters, resumed from the best trial's newest checkpoint; the condition
// reads the tuned objective. A reference to a parameter the search does not have is
// refused, naming the field.
func TestPipelineExperimentStepFeedsTheBestTrial(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	doc := tuneAndTrainSpec(t, ws)

	bad := strings.Replace(doc, "${steps.tune.outputs.bestParams.lr}", "${steps.tune.outputs.bestParams.momentum}", 1)
	_, err := c.RunPipeline(ctx, []byte(bad), nil)
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || len(apiErr.API.Details) != 1 || apiErr.API.Details[0].Field != "spec.steps[2].job.args[3]" {
		t.Fatalf("an unknown best parameter: %v, want 422 on spec.steps[2].job.args[3]", err)
	}
	if _, err := c.GetExperiment(ctx, ws, "tune-and-train-tune"); !dlc.IsNotFound(err) {
		t.Fatalf("the refused pipeline created its experiment: %v", err)
	}

	// The promote step runs whatever accuracy three epochs reach.
	if _, err := c.RunPipeline(ctx, []byte(doc), map[string]string{"currentAccuracy": "0.1"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(ctx, ws, "tune-and-train", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	for _, s := range st.Steps {
		t.Logf("step %s: %s %s: %s; outputs %v", s.Name, s.Phase, s.Reason, s.Message, s.Outputs)
	}
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run %s (%s), want Succeeded", st.Phase, st.Message)
	}
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, "tune-and-train"), "pipeline_experiment_step.json")

	// The step's experiment ran for real: its trials' jobs, its best trial.
	exp, err := c.GetExperiment(ctx, ws, "tune-and-train-tune")
	if err != nil {
		t.Fatal(err)
	}
	es := exp.Status
	if es.Phase != schemas.ExperimentSucceeded || es.BestTrial == nil || es.Completed != 2 {
		t.Fatalf("experiment %s, best %v, %d completed; want Succeeded with 2 completed trials", es.Phase, es.BestTrial, es.Completed)
	}
	if exp.Spec.Metadata.Labels[schemas.LabelPipeline] != "tune-and-train" || exp.Spec.Metadata.Labels[schemas.LabelPipelineStep] != "tune" {
		t.Errorf("experiment labels %v", exp.Spec.Metadata.Labels)
	}
	best := es.Trials[*es.BestTrial]
	tune := st.Step("tune")
	lr := strconv.FormatFloat(es.BestParams["lr"].(float64), 'g', -1, 64)
	batch := fmt.Sprint(es.BestParams["batch_size"])
	if tune.Experiment != "tune-and-train-tune" || tune.Outputs["bestTrial"] != strconv.Itoa(best.ID) || tune.Outputs["bestJob"] != best.Job ||
		tune.Outputs["objective"] != strconv.FormatFloat(*es.BestValue, 'g', -1, 64) ||
		tune.Outputs["bestParams.lr"] != lr || tune.Outputs["bestParams.batch_size"] != batch {
		t.Errorf("tune outputs %v; the experiment's best trial is %d (%s) with %v = %v", tune.Outputs, best.ID, best.Job, es.BestParams, *es.BestValue)
	}
	// The checkpoint output is the best trial job's newest complete checkpoint.
	bestJob, err := c.GetJob(ctx, ws, best.Job)
	if err != nil {
		t.Fatal(err)
	}
	ck := tune.Outputs["checkpoint"]
	if ck == "" || ck != bestJob.Status.LastCheckpoint {
		t.Errorf("tune's checkpoint %q; the best trial's job %s last saved %q", ck, best.Job, bestJob.Status.LastCheckpoint)
	}
	if uri, _, err := checkpoint.ParseRef(ck); err != nil || uri != "s3://dlc/workspaces/"+ws+"/checkpoints/tune-and-train-tune/"+best.Job {
		t.Errorf("tune's checkpoint %q (%v): not under the best trial's job", ck, err)
	}

	// train ran with the best parameters, resumed from that checkpoint.
	train, err := c.GetJob(ctx, ws, "tune-and-train-train")
	if err != nil {
		t.Fatal(err)
	}
	args := train.Spec.Spec.Args
	if i := slices.Index(args, "--lr"); i < 0 || args[i+1] != lr {
		t.Errorf("train args %q, want --lr %s", args, lr)
	}
	if i := slices.Index(args, "--batch-size"); i < 0 || args[i+1] != batch {
		t.Errorf("train args %q, want --batch-size %s", args, batch)
	}
	if train.Spec.Spec.Checkpoint.ResumeFrom != ck {
		t.Errorf("train resumes from %q, want %q", train.Spec.Spec.Checkpoint.ResumeFrom, ck)
	}
	resumed := false
	for _, r := range jobLogs(t, ctx, ws, "tune-and-train-train") {
		if strings.Contains(r.Line, "resumed from "+ck+":") {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("train's logs do not say it resumed from %s", ck)
	}
	// The promote step got the tuned objective and the best trial's job.
	promote, err := c.GetJob(ctx, ws, "tune-and-train-promote")
	if err != nil {
		t.Fatal(err)
	}
	penv := map[string]string{}
	for _, e := range promote.Spec.Spec.Env {
		penv[e.Name] = e.Value
	}
	if diff := cmp.Diff(map[string]string{"TRIAL": best.Job, "TUNED": tune.Outputs["objective"]},
		map[string]string{"TRIAL": penv["TRIAL"], "TUNED": penv["TUNED"]}); diff != "" {
		t.Errorf("promote env (-want +got):\n%s", diff)
	}
}
