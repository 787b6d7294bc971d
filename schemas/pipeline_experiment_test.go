package schemas_test

import (
	"os"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// tuneAndTrain is examples/pipeline/tune-and-train.yaml: prepare → tune (an
// experiment) → train → better → promote.
func tuneAndTrain(t *testing.T) *schemas.Pipeline {
	t.Helper()
	data, err := os.ReadFile("../examples/pipeline/tune-and-train.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return decodePipeline(t, string(data))
}

func TestPipelineExperimentStepValid(t *testing.T) {
	p := tuneAndTrain(t)
	checkValidate(t, p, nil)
	if p.Spec.Steps[1].Experiment == nil || p.Spec.Steps[1].Experiment.MaxTrials != 4 {
		t.Fatalf("tune step decoded as %+v", p.Spec.Steps[1])
	}
}

func TestPipelineExperimentStepInvalid(t *testing.T) {
	tests := map[string]struct {
		edit func(p *schemas.Pipeline)
		want schemas.ErrorList
	}{
		"unknown best parameter": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].Job.Args[3] = "${steps.tune.outputs.bestParams.momentum}" },
			want: schemas.ErrorList{{Field: "spec.steps[2].job.args[3]",
				Detail: `${steps.tune.outputs.bestParams.momentum}: step tune has no search-space parameter "momentum"`}},
		},
		"unknown output": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[4].Job.Env[1].Value = "${steps.tune.outputs.job}" },
			want: schemas.ErrorList{{Field: "spec.steps[4].job.env[1].value",
				Detail: `${steps.tune.outputs.job}: step tune is an experiment: it has no output "job" (it has experiment, bestTrial, bestJob, objective, bestParams.<name>, and with trialTemplate.checkpoint checkpoint and checkpointURI)`}},
		},
		"checkpoint without trialTemplate.checkpoint": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Experiment.TrialTemplate.Checkpoint = nil },
			want: schemas.ErrorList{{Field: "spec.steps[2].job.checkpoint.resumeFrom",
				Detail: "${steps.tune.outputs.checkpoint}: step tune has no trialTemplate.checkpoint"}},
		},
		"metric other than the objective": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[4].Job.Env[2].Value = "${steps.tune.metrics.loss}" },
			want: schemas.ErrorList{{Field: "spec.steps[4].job.env[2].value",
				Detail: `${steps.tune.metrics.loss}: step tune is an experiment: its only metric is its objective "accuracy"`}},
		},
		"unknown parameter in the trial template": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Experiment.TrialTemplate.Args[1] = "${params.epoch}" },
			want: schemas.ErrorList{
				{Field: "spec.steps[1].experiment.trialTemplate.args[1]",
					Detail: `unknown parameter "epoch" in ${params.epoch}; the search space defines batch_size, lr, currentAccuracy, epochs`},
			},
		},
		"search parameter named like a pipeline parameter": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Experiment.SearchSpace[0].Name = "epochs" },
			want: schemas.ErrorList{
				{Field: "spec.steps[1].experiment.searchSpace[0].name",
					Detail: `"epochs" is also a pipeline parameter: ${params.epochs} would be ambiguous; rename one`},
				{Field: "spec.steps[1].experiment.trialTemplate.args[3]",
					Detail: `unknown parameter "lr" in ${params.lr}; the search space defines batch_size, epochs, currentAccuracy, epochs`},
				{Field: "spec.steps[2].job.args[3]", Detail: `${steps.tune.outputs.bestParams.lr}: step tune has no search-space parameter "lr"`},
			},
		},
		"several objectives": {
			edit: func(p *schemas.Pipeline) {
				e := p.Spec.Steps[1].Experiment
				e.Objectives = []schemas.ObjectiveSpec{{Metric: "accuracy", Direction: "maximize"}, {Metric: "loss", Direction: "minimize"}}
				e.Objective = schemas.ObjectiveSpec{}
				p.Spec.Steps[3].Condition.Expression = "steps.train.metrics.accuracy > 0.5"
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[1].experiment.objective.direction", Detail: "required"},
				{Field: "spec.steps[1].experiment.objective.metric", Detail: "required"},
				{Field: "spec.steps[1].experiment.objectives",
					Detail: "an experiment step needs a single objective: its outputs are the best trial's"},
			},
		},
		"experiment name too long": {
			edit: func(p *schemas.Pipeline) { p.Metadata.Name = "tune-and-train-on-the-new-data-today" },
			want: schemas.ErrorList{{Field: "spec.steps[1].name",
				Detail: "the step's experiment name <pipeline>-tune would be longer than 40 characters; shorten the pipeline's or the step's name"}},
		},
		"experiment and job": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Job = p.Spec.Steps[0].Job },
			want: schemas.ErrorList{{Field: "spec.steps[1]", Detail: "must set only one of job, experiment and condition"}},
		},
		"experiment step with outputs and retries": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[1].Outputs = map[string]string{"model": "s3://dlc/x"}
				p.Spec.Steps[1].Retries = &schemas.StepRetries{Count: 1}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[1].outputs", Detail: "an experiment step's outputs are its best trial's; it declares none"},
				{Field: "spec.steps[1].retries", Detail: "only a job step can be retried"},
			},
		},
		"bad search space": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Experiment.MaxTrials = 0 },
			want: schemas.ErrorList{{Field: "spec.steps[1].experiment.maxTrials", Detail: "must be >= 1"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tuneAndTrain(t)
			tc.edit(p)
			checkValidate(t, p, tc.want)
		})
	}
}
