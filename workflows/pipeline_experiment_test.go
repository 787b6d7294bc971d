package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// tuneDoc is prepare → tune (an experiment) → train (the best parameters, resumed from
// the best trial's checkpoint) → better (a condition on the tune's objective).
const tuneDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: loop, workspace: team, labels: {app: ctr}}
spec:
  params:
    - {name: epochs, default: "3"}
    - {name: floor, default: "0.5"}
  steps:
    - name: prepare
      job: {framework: custom, command: [prep], roles: {worker: {replicas: 1}}}
      outputs: {data: "s3://dlc/data/${pipeline.name}"}
    - name: tune
      dependsOn: [prepare]
      experiment:
        searchSpace:
          - {name: lr, type: float, min: 0.01, max: 1}
          - {name: opt, type: categorical, values: [sgd, adam]}
        objective: {metric: accuracy, direction: maximize}
        maxTrials: 2
        trialTemplate:
          framework: custom
          command: [train, --lr, "${params.lr}", --opt, "${params.opt}", --epochs, "${params.epochs}", --data, "${steps.prepare.outputs.data}"]
          roles: {worker: {replicas: 1}}
          checkpoint: {uri: "s3://dlc/ckpt/${pipeline.name}"}
    - name: train
      dependsOn: [tune]
      job:
        framework: custom
        command: [train, --lr, "${steps.tune.outputs.bestParams.lr}", --opt, "${steps.tune.outputs.bestParams.opt}",
          --from, "${steps.tune.outputs.checkpoint}", --trial, "${steps.tune.outputs.bestTrial}", "${steps.tune.outputs.bestJob}",
          "${steps.tune.outputs.objective}", "${steps.tune.metrics.accuracy}"]
        roles: {worker: {replicas: 1}}
    - name: better
      dependsOn: [tune]
      condition: {expression: "steps.tune.metrics.accuracy > params.floor"}
`

// fakeExperiment is how the fake Experiment workflow ends.
type fakeExperiment struct {
	status schemas.ExperimentStatus
	// forever runs until stopped (the "test-stop" signal), then waits on as a stopped
	// experiment does.
	forever bool
}

func registerFakeExperiment(h *pipelineHarness, fe fakeExperiment, got *[]schemas.Experiment) {
	h.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.ExperimentInput) (workflows.ExperimentResult, error) {
		*got = append(*got, in.Experiment)
		if fe.forever {
			workflow.GetSignalChannel(ctx, "test-stop").Receive(ctx, nil)
			// A stopped experiment waits for a resume (7 days) before it ends.
			_ = workflow.Sleep(ctx, 7*24*time.Hour)
			return workflows.ExperimentResult{Status: schemas.ExperimentStatus{Phase: schemas.ExperimentStopped}}, nil
		}
		_ = workflow.Sleep(ctx, 30*time.Minute)
		return workflows.ExperimentResult{Status: fe.status}, nil
	}, workflow.RegisterOptions{Name: workflows.ExperimentWorkflowName})
}

func TestPipelineExperimentStepPassesTheBestTrial(t *testing.T) {
	h := newPipelineHarness(t, nil)
	best, value := 1, 0.93
	var exps []schemas.Experiment
	registerFakeExperiment(h, fakeExperiment{status: schemas.ExperimentStatus{
		Phase:      schemas.ExperimentSucceeded,
		Trials:     []schemas.TrialStatus{{ID: 0, Job: "loop-tune-t0", Phase: schemas.TrialCompleted}, {ID: 1, Job: "loop-tune-t1-r1", Phase: schemas.TrialCompleted}},
		BestTrial:  &best,
		BestValue:  &value,
		BestParams: map[string]any{"lr": 0.125, "opt": "adam"},
		Completed:  2,
	}}, &exps)
	var listed []string
	onActivity(h.env, jobActs.LatestCheckpoint, func(_ context.Context, in activities.LatestCheckpointInput) (string, error) {
		listed = append(listed, in.Workspace+" "+in.URI)
		return in.URI + "/000000000042", nil
	})
	st := h.run(t, tuneDoc, nil)
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase = %s (%s), want Succeeded; steps %v", st.Phase, st.Message, stepPhases(st))
	}
	// The experiment: named <run>-<step>, labelled, with the pipeline's references
	// substituted and the trial's left for the experiment.
	if len(exps) != 1 {
		t.Fatalf("experiments started: %d, want 1", len(exps))
	}
	e := exps[0]
	if e.Metadata.Name != "loop-tune" || e.Metadata.Workspace != "team" || e.Metadata.Labels[schemas.LabelPipelineStep] != "tune" ||
		e.Metadata.Labels["app"] != "ctr" {
		t.Errorf("experiment metadata = %+v", e.Metadata)
	}
	wantCmd := []string{"train", "--lr", "${params.lr}", "--opt", "${params.opt}", "--epochs", "3", "--data", "s3://dlc/data/loop"}
	if diff := cmp.Diff(wantCmd, e.Spec.TrialTemplate.Command); diff != "" {
		t.Errorf("trial template command (-want +got):\n%s", diff)
	}
	if e.Spec.TrialTemplate.Checkpoint.URI != "s3://dlc/ckpt/loop" || e.Spec.Parallelism != schemas.DefaultParallelism {
		t.Errorf("experiment not substituted or defaulted: %+v", e.Spec)
	}
	// The best trial's checkpoint is read under its latest job's name.
	if diff := cmp.Diff([]string{"team s3://dlc/ckpt/loop/loop-tune-t1-r1"}, listed); diff != "" {
		t.Errorf("checkpoints listed (-want +got):\n%s", diff)
	}
	tune := st.Step("tune")
	wantOut := map[string]string{
		"experiment": "loop-tune", "bestTrial": "1", "bestJob": "loop-tune-t1-r1", "objective": "0.93",
		"bestParams.lr": "0.125", "bestParams.opt": "adam",
		"checkpointURI": "s3://dlc/ckpt/loop/loop-tune-t1-r1", "checkpoint": "s3://dlc/ckpt/loop/loop-tune-t1-r1/000000000042",
	}
	if diff := cmp.Diff(wantOut, tune.Outputs); diff != "" {
		t.Errorf("tune outputs (-want +got):\n%s", diff)
	}
	if tune.Experiment != "loop-tune" || tune.Reason != workflows.ReasonExperimentSucceeded {
		t.Errorf("tune = %+v", tune)
	}
	wantTrain := []string{"train", "--lr", "0.125", "--opt", "adam", "--from", "s3://dlc/ckpt/loop/loop-tune-t1-r1/000000000042",
		"--trial", "1", "loop-tune-t1-r1", "0.93", "0.93"}
	if diff := cmp.Diff(wantTrain, h.startedJob("loop-train").Spec.Command); diff != "" {
		t.Errorf("train command (-want +got):\n%s", diff)
	}
	if b := st.Step("better"); b.ConditionResult == nil || !*b.ConditionResult {
		t.Errorf("better = %+v, want true", b)
	}
}

func TestPipelineExperimentStepWithoutCompletedTrialFails(t *testing.T) {
	for name, status := range map[string]schemas.ExperimentStatus{
		"no completed trial": {Phase: schemas.ExperimentSucceeded, Failed: 2},
		"failed":             {Phase: schemas.ExperimentFailed, Message: "too many failed trials"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newPipelineHarness(t, nil)
			var exps []schemas.Experiment
			registerFakeExperiment(h, fakeExperiment{status: status}, &exps)
			st := h.run(t, tuneDoc, nil)
			tune := st.Step("tune")
			if st.Phase != schemas.PipelineFailed || tune.Phase != schemas.StepFailed {
				t.Fatalf("run %s, tune %+v; want both Failed", st.Phase, tune)
			}
			want := workflows.ReasonNoCompletedTrial
			if status.Phase == schemas.ExperimentFailed {
				want = workflows.ReasonExperimentFailed
			}
			if tune.Reason != want || st.Step("train").Phase != schemas.StepSkipped {
				t.Errorf("tune %s (%s), train %s; want %s, Skipped", tune.Reason, tune.Message, st.Step("train").Phase, want)
			}
		})
	}
}

func TestPipelineStopStopsTheExperimentStep(t *testing.T) {
	h := newPipelineHarness(t, nil)
	var exps []schemas.Experiment
	registerFakeExperiment(h, fakeExperiment{forever: true}, &exps)
	var stopErr error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { stopErr = err },
			OnAccept:   func() {},
			OnComplete: func(_ any, err error) { stopErr = err },
		}, workflows.StopRequest{Reason: "enough"})
	}, 2*time.Hour)
	st := h.run(t, tuneDoc, nil)
	if stopErr != nil {
		t.Errorf("stop: %v", stopErr)
	}
	if st.Phase != schemas.PipelineStopped {
		t.Fatalf("phase = %s (%s), want Stopped", st.Phase, st.Message)
	}
	if tune := st.Step("tune"); tune.Phase != schemas.StepCancelled {
		t.Errorf("tune = %+v, want Cancelled", tune)
	}
	// The run ended once the experiment was stopped, not when the stopped experiment's
	// workflow gave up waiting for a resume (7 days on the workflow clock).
	if took := st.FinishTime.Sub(*st.StartTime); took > 3*time.Hour {
		t.Errorf("the run took %s on the workflow clock: it waited for the stopped experiment's workflow", took)
	}
	if diff := cmp.Diff([]string{workflows.ExperimentWorkflowID("team", "loop-tune")}, h.stopped); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
}

// noopUpdate is an update callback that fails the test on an error.
func noopUpdate(t *testing.T) *testsuite.TestUpdateCallback {
	return &testsuite.TestUpdateCallback{
		OnReject: func(err error) { t.Errorf("update rejected: %v", err) },
		OnAccept: func() {},
		OnComplete: func(_ any, err error) {
			if err != nil {
				t.Errorf("update: %v", err)
			}
		},
	}
}
