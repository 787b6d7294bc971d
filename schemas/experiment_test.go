package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

func expF64(v float64) *float64 { return new(v) }

func expI32(v int32) *int32 { return new(v) }

// experiment returns a valid experiment tuning lr, l2 and batch_size of a one-replica
// trainer, changed by each mutation.
func testExp(mutate ...func(e *schemas.Experiment)) *schemas.Experiment {
	e := &schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   schemas.ObjectMeta{Name: "tune", Workspace: "vision", Labels: map[string]string{"team": "cv"}},
		Spec: schemas.ExperimentSpec{
			SearchSpace: []schemas.ParameterSpec{
				{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.001), Max: expF64(1), Log: true},
				{Name: "l2", Type: schemas.ParameterFloat, Min: expF64(0), Max: new(0.01)},
				{Name: "batch_size", Type: schemas.ParameterCategorical, Values: []schemas.CategoricalValue{"16", "32", "64"}},
				{Name: "epochs", Type: schemas.ParameterInt, Min: expF64(2), Max: expF64(10), Step: 2},
			},
			Objective: schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize},
			MaxTrials: 16,
			TrialTemplate: schemas.TrainingJobSpec{
				Framework: schemas.FrameworkPyTorch,
				Command:   []string{"trainer", "--lr", "${params.lr}"},
				Args:      []string{"--batch-size=${params.batch_size}", "--epochs", "${params.epochs}"},
				Env:       []schemas.EnvVar{{Name: "L2", Value: "${params.l2}"}},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			},
		},
	}
	for _, m := range mutate {
		m(e)
	}
	return e
}

func expParam(i int, mutate func(p *schemas.ParameterSpec)) func(e *schemas.Experiment) {
	return func(e *schemas.Experiment) { mutate(&e.Spec.SearchSpace[i]) }
}

func TestExperimentValidate(t *testing.T) {
	tests := map[string]struct {
		exp  *schemas.Experiment
		want schemas.ErrorList
	}{
		// Valid experiments.
		"fixture":   {exp: testExp()},
		"defaulted": {exp: testExp(func(e *schemas.Experiment) { e.Default() })},
		"grid with float steps": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.Name = schemas.AlgorithmGrid
			e.Spec.SearchSpace[0] = schemas.ParameterSpec{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.1), Max: new(0.5), Step: 0.1}
			e.Spec.SearchSpace[1].Step = 0.005
		})},
		"asha and goal": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingASHA, MinResource: 2, ReductionFactor: 2, MaxResource: 20}
			e.Spec.Objective.Goal = new(0.95)
			e.Spec.Objective.StepMetric = "epoch"
		})},
		"median": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingMedian, WarmupSteps: 3, StartupTrials: expI32(0)}
		})},
		"role-level references": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.TrialTemplate.Command = nil
			e.Spec.TrialTemplate.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 1,
				Command: []string{"trainer", "--lr=${params.lr}${params.l2}"},
				Env:     []schemas.EnvVar{{Name: "BS", Value: "${params.batch_size}"}}}}
		})},
		"zero failures tolerated, no retries": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.MaxFailedTrials, e.Spec.MaxTrialRetries = expI32(0), expI32(0)
		})},

		// Every problem at once, each with its path.
		"empty spec": {
			exp: testExp(func(e *schemas.Experiment) { e.Spec = schemas.ExperimentSpec{} }),
			want: schemas.ErrorList{
				{Field: "spec.maxTrials", Detail: "must be >= 1"},
				{Field: "spec.objective.direction", Detail: "required"},
				{Field: "spec.objective.metric", Detail: "required"},
				{Field: "spec.searchSpace", Detail: "must have at least 1 items"},
				{Field: "spec.trialTemplate.framework", Detail: "required"},
				{Field: "spec.trialTemplate.roles", Detail: "must have at least 1 role"},
			},
		},
		"max not greater than min, and more": {
			exp: testExp(
				expParam(0, func(p *schemas.ParameterSpec) { p.Min = expF64(0); p.Max = nil }),
				expParam(1, func(p *schemas.ParameterSpec) { p.Max = expF64(0) }),
				expParam(3, func(p *schemas.ParameterSpec) {
					p.Min = new(1.5)
					p.Step = 0.5
					p.Values = []schemas.CategoricalValue{"a"}
				}),
			),
			want: schemas.ErrorList{
				{Field: "spec.searchSpace[0].max", Detail: "required"},
				{Field: "spec.searchSpace[0].min", Detail: "must be > 0 when log is true"},
				{Field: "spec.searchSpace[1].max", Detail: "must be greater than min"},
				{Field: "spec.searchSpace[3].min", Detail: "must be a whole number for an int parameter"},
				{Field: "spec.searchSpace[3].step", Detail: "must be a whole number for an int parameter"},
				{Field: "spec.searchSpace[3].values", Detail: "applies to categorical parameters only"},
			},
		},
		"names, types and categorical values": {
			exp: testExp(
				expParam(0, func(p *schemas.ParameterSpec) { p.Name = "1lr" }),
				expParam(1, func(p *schemas.ParameterSpec) { p.Type = "double" }),
				expParam(2, func(p *schemas.ParameterSpec) {
					p.Values = []schemas.CategoricalValue{"16", "", "16", schemas.CategoricalValue(strings.Repeat("x", 257))}
					p.Log = true
				}),
				expParam(3, func(p *schemas.ParameterSpec) { p.Name = "batch_size"; p.Step = 20 }),
			),
			want: schemas.ErrorList{
				{Field: "spec.searchSpace[0].name", Detail: "must be letters, digits, '_' and '-', not starting with a digit or '-'"},
				{Field: "spec.searchSpace[1].type", Detail: "must be one of int, float, categorical"},
				{Field: "spec.searchSpace[2].log", Detail: "applies to int and float parameters only"},
				{Field: "spec.searchSpace[2].values[1]", Detail: "must not be empty"},
				{Field: "spec.searchSpace[2].values[2]", Detail: `duplicate "16" (first at spec.searchSpace[2].values[0])`},
				{Field: "spec.searchSpace[2].values[3]", Detail: "must be at most 256 characters"},
				{Field: "spec.searchSpace[3].name", Detail: `duplicate name "batch_size" (first at spec.searchSpace[2])`},
				{Field: "spec.searchSpace[3].step", Detail: "must be at most max - min (8)"},
				{Field: "spec.trialTemplate.args[2]", Detail: `unknown parameter "epochs" in ${params.epochs}; the search space defines 1lr, batch_size, l2`},
				{Field: "spec.trialTemplate.command[2]", Detail: `unknown parameter "lr" in ${params.lr}; the search space defines 1lr, batch_size, l2`},
			},
		},
		"empty categorical": {
			exp:  testExp(expParam(2, func(p *schemas.ParameterSpec) { p.Values = nil; p.Min = expF64(1) })),
			want: schemas.ErrorList{{Field: "spec.searchSpace[2].min", Detail: "applies to int and float parameters only"}, {Field: "spec.searchSpace[2].values", Detail: "required for a categorical parameter"}},
		},
		"unknown and unterminated references": {
			exp: testExp(func(e *schemas.Experiment) {
				e.Spec.TrialTemplate.Args = []string{"--x=${params.lrate}", "${params.lr"}
				e.Spec.TrialTemplate.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 1,
					Env: []schemas.EnvVar{{Name: "X", Value: "${params.}"}}}}
			}),
			want: schemas.ErrorList{
				{Field: "spec.trialTemplate.args[0]", Detail: `unknown parameter "lrate" in ${params.lrate}; the search space defines batch_size, epochs, l2, lr`},
				{Field: "spec.trialTemplate.args[1]", Detail: "unterminated ${params.: want ${params.NAME}"},
				{Field: "spec.trialTemplate.roles.worker.env[0].value", Detail: "${params.} names no parameter"},
			},
		},
		"algorithm, early stopping and limits": {
			exp: testExp(func(e *schemas.Experiment) {
				e.Spec.Algorithm = schemas.AlgorithmSpec{Name: "bayes", StartupTrials: expI32(-1)}
				e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: "pbt", WarmupSteps: 2, ReductionFactor: 1, MaxResource: 5, StartupTrials: expI32(1)}
				e.Spec.MaxTrials = 1001
				e.Spec.Parallelism = -1
				e.Spec.MaxFailedTrials = expI32(-1)
				e.Spec.MaxTrialRetries = expI32(6)
				e.Spec.Objective = schemas.ObjectiveSpec{Metric: "val loss", Direction: "down", StepMetric: "epoch"}
			}),
			want: schemas.ErrorList{
				{Field: "spec.algorithm.name", Detail: "must be one of grid, random, tpe, cmaes, gp, hyperband, bohb, nsga2, pbt"},
				{Field: "spec.algorithm.startupTrials", Detail: "applies to algorithms tpe, gp and bohb only"},
				{Field: "spec.algorithm.startupTrials", Detail: "must be between 0 and 1000"},
				{Field: "spec.earlyStopping.maxResource", Detail: "applies to rules asha and hyperband only"},
				{Field: "spec.earlyStopping.reductionFactor", Detail: "applies to rules asha and hyperband only"},
				{Field: "spec.earlyStopping.reductionFactor", Detail: "must be >= 2 (0 means 3)"},
				{Field: "spec.earlyStopping.rule", Detail: "must be one of none, median, asha, hyperband"},
				{Field: "spec.earlyStopping.startupTrials", Detail: "applies to rule median only"},
				{Field: "spec.earlyStopping.warmupSteps", Detail: "applies to rule median only"},
				{Field: "spec.maxFailedTrials", Detail: "must be between 0 and 1000"},
				{Field: "spec.maxTrialRetries", Detail: "must be between 0 and 5"},
				{Field: "spec.maxTrials", Detail: "must be <= 1000"},
				{Field: "spec.objective.direction", Detail: "must be one of minimize, maximize"},
				{Field: "spec.objective.metric", Detail: "must be a metric name: letters, digits, '_', '.', ':', '/' and '-'"},
				{Field: "spec.parallelism", Detail: "must be >= 0"},
			},
		},
		"grid needs float steps": {
			exp: testExp(func(e *schemas.Experiment) {
				e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmGrid, ConstantLiar: true, Multivariate: true}
			}),
			want: schemas.ErrorList{
				{Field: "spec.algorithm.constantLiar", Detail: "applies to algorithm tpe only"},
				{Field: "spec.algorithm.multivariate", Detail: "applies to algorithm tpe only"}, {Field: "spec.searchSpace[0].step", Detail: "required for a float parameter with algorithm grid"}, {Field: "spec.searchSpace[1].step", Detail: "required for a float parameter with algorithm grid"}},
		},
		"name too long for trial names, kind, step metric and logs": {
			exp: testExp(func(e *schemas.Experiment) {
				e.Metadata.Name = strings.Repeat("e", 41)
				e.Kind = schemas.KindTrainingJob
				e.Spec.Objective.StepMetric = "accuracy"
				off := false
				e.Spec.TrialTemplate.Logs.Forward = &off
			}),
			want: schemas.ErrorList{
				{Field: "kind", Detail: "must be Experiment"},
				{Field: "metadata.name", Detail: "must be at most 40 characters: trial job names add -t<N>-r<K>"},
				{Field: "spec.objective.stepMetric", Detail: "must differ from metric"},
				{Field: "spec.trialTemplate.logs.forward", Detail: "must be true: the experiment reads the trials' metrics from their forwarded logs"},
			},
		},
		"the template is validated as a TrainingJob spec": {
			exp: testExp(func(e *schemas.Experiment) {
				e.Spec.TrialTemplate.Framework = "jax"
				e.Spec.TrialTemplate.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 0}}
			}),
			want: schemas.ErrorList{
				{Field: "spec.trialTemplate.framework", Detail: frameworksMsg},
				{Field: "spec.trialTemplate.roles.worker.replicas", Detail: "must be >= 1"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tt.exp, tt.want)
		})
	}
}

func TestExperimentDecodeAndDefault(t *testing.T) {
	doc := `
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: tune}
spec:
  searchSpace:
    - {name: lr, type: float, min: 0.01, max: 1, log: true}
    - {name: batch_size, type: categorical, values: [16, "32", true]}
  objective: {metric: accuracy, direction: maximize}
  earlyStopping: {rule: asha}
  maxTrials: 8
  trialTemplate:
    framework: custom
    command: [trainer, --lr, "${params.lr}"]
    roles: {worker: {replicas: 1}}
`
	obj, err := schemas.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := obj.(*schemas.Experiment)
	if !ok {
		t.Fatalf("Decode returned %T, want *Experiment", obj)
	}
	if errs := e.Validate(); errs != nil {
		t.Fatalf("Validate: %v", errs)
	}
	forward := true
	want := schemas.ExperimentSpec{
		SearchSpace: []schemas.ParameterSpec{
			{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.01), Max: expF64(1), Log: true},
			{Name: "batch_size", Type: schemas.ParameterCategorical, Values: []schemas.CategoricalValue{"16", "32", "true"}},
		},
		Objective:       schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize, StepMetric: "step"},
		Algorithm:       schemas.AlgorithmSpec{Name: schemas.AlgorithmTPE},
		EarlyStopping:   schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingASHA, MinResource: 1, ReductionFactor: 3},
		MaxTrials:       8,
		Parallelism:     1,
		MaxFailedTrials: expI32(3),
		MaxTrialRetries: expI32(1),
		TrialTemplate: schemas.TrainingJobSpec{
			Framework: schemas.FrameworkCustom,
			Command:   []string{"trainer", "--lr", "${params.lr}"},
			Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			Resources: schemas.PoolSpec{Pool: schemas.PoolQuota},
			Logs:      schemas.LogSpec{Forward: &forward},
		},
	}
	if diff := cmp.Diff(want, e.Spec); diff != "" {
		t.Errorf("decoded and defaulted spec (-want +got):\n%s", diff)
	}
	if e.Metadata.Workspace != schemas.DefaultWorkspace {
		t.Errorf("workspace %q", e.Metadata.Workspace)
	}
	if diff := cmp.Diff([]any{16.0, 32.0, true}, []any{e.Spec.SearchSpace[1].Values[0].JSONValue(),
		e.Spec.SearchSpace[1].Values[1].JSONValue(), e.Spec.SearchSpace[1].Values[2].JSONValue()}); diff != "" {
		t.Errorf("JSON values of the choices (-want +got):\n%s", diff)
	}

	// Type errors are reported with their paths, all at once.
	_, err = schemas.DecodeExperiment([]byte(`{"kind": "Experiment", "spec": {"maxTrials": "many",
		"searchSpace": [{"name": "x", "type": "categorical", "values": [[1]], "mn": 1}]}}`))
	var list schemas.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("DecodeExperiment: %v, want an ErrorList", err)
	}
	if diff := cmp.Diff([]string{"spec.maxTrials", "spec.searchSpace[0].mn", "spec.searchSpace[0].values[0]"}, list.Fields()); diff != "" {
		t.Errorf("fields (-want +got):\n%s\n%v", diff, list)
	}
	if _, err := schemas.DecodeExperiment([]byte("kind: TrainingJob\n")); err == nil || !strings.Contains(err.Error(), "kind: must be Experiment") {
		t.Errorf("DecodeExperiment of a TrainingJob: %v", err)
	}
}

func TestExperimentTrialJob(t *testing.T) {
	e := testExp(func(e *schemas.Experiment) {
		e.Spec.TrialTemplate.Checkpoint = &schemas.CheckpointSpec{URI: "s3://dlc/tune/"}
		e.Spec.TrialTemplate.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 1,
			Args: []string{"--l2=${params.l2}", "--big", "${params.big}"}}}
	})
	params := map[string]string{"lr": "0.0031", "l2": "1e-05", "batch_size": "32", "epochs": "6", "big": "1000000"}
	job, err := e.TrialJob("tune-t3", 3, params)
	if err != nil {
		t.Fatal(err)
	}
	if errs := job.Validate(); errs != nil {
		t.Errorf("trial job is invalid: %v", errs)
	}
	want := []string{"trainer", "--lr", "0.0031"}
	if diff := cmp.Diff(want, job.Spec.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--batch-size=32", "--epochs", "6"}, job.Spec.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--l2=1e-05", "--big", "1000000"}, job.Spec.Roles["worker"].Args); diff != "" {
		t.Errorf("role args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]schemas.EnvVar{{Name: "L2", Value: "1e-05"}}, job.Spec.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if job.Spec.Checkpoint.URI != "s3://dlc/tune/tune-t3" {
		t.Errorf("checkpoint URI %q", job.Spec.Checkpoint.URI)
	}
	if diff := cmp.Diff(map[string]string{"team": "cv", "experiment": "tune", "trial": "3"}, job.Metadata.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if job.Metadata.Name != "tune-t3" || job.Metadata.Workspace != "vision" || job.Kind != schemas.KindTrainingJob {
		t.Errorf("metadata %+v kind %s", job.Metadata, job.Kind)
	}
	// The template itself is unchanged.
	if e.Spec.TrialTemplate.Command[2] != "${params.lr}" || e.Spec.TrialTemplate.Checkpoint.URI != "s3://dlc/tune/" {
		t.Errorf("template changed: %+v", e.Spec.TrialTemplate)
	}
	if _, err := e.TrialJob("tune-t4", 4, map[string]string{"lr": "0.1"}); err == nil || !strings.Contains(err.Error(), `parameter "batch_size" is not defined`) {
		t.Errorf("missing parameter: %v", err)
	}
}

func TestObjective(t *testing.T) {
	maxi := schemas.ObjectiveSpec{Direction: schemas.Maximize, Goal: new(0.9)}
	mini := schemas.ObjectiveSpec{Direction: schemas.Minimize, Goal: new(0.1)}
	got := []bool{maxi.Better(2, 1), maxi.Reached(0.9), maxi.Reached(0.89), mini.Better(2, 1), mini.Reached(0.1), mini.Reached(0.2),
		(&schemas.ObjectiveSpec{Direction: schemas.Maximize}).Reached(1e9)}
	if diff := cmp.Diff([]bool{true, true, false, false, true, false, false}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestGridSize(t *testing.T) {
	e := testExp(func(e *schemas.Experiment) {
		e.Spec.SearchSpace[0] = schemas.ParameterSpec{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.1), Max: new(0.5), Step: 0.1}
		e.Spec.SearchSpace[1].Step = 0.005
	})
	// lr: 5 values, l2: 3, batch_size: 3, epochs 2,4,6,8,10: 5.
	if got := e.Spec.GridSize(); got != 5*3*3*5 {
		t.Errorf("GridSize() = %d, want 225", got)
	}
	if got := testExp().Spec.GridSize(); got != 0 {
		t.Errorf("GridSize() without float steps = %d, want 0", got)
	}
}
