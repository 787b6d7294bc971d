package schemas_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

func pbtExp(mutate ...func(e *schemas.Experiment)) *schemas.Experiment {
	return testExp(append([]func(e *schemas.Experiment){func(e *schemas.Experiment) {
		e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmPBT, Seed: 3,
			PBT: &schemas.PBTSpec{PerturbationInterval: 2}}
		e.Spec.Parallelism = 4
		e.Spec.MaxTrials = 12
		e.Spec.TrialTemplate.Checkpoint = &schemas.CheckpointSpec{URI: "s3://ckpt/tune"}
	}}, mutate...)...)
}

func TestExperimentPBTValidate(t *testing.T) {
	cases := map[string]struct {
		exp  *schemas.Experiment
		want []string
	}{
		"pbt": {exp: pbtExp()},
		"pbt with every setting": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.PBT = &schemas.PBTSpec{PerturbationInterval: 5, QuantileFraction: 0.5,
				ResampleProbability: new(0.0), PerturbationFactors: []float64{1.5, 0.5, 1}}
		})},
		"pbt settings out of range": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.PBT = &schemas.PBTSpec{PerturbationInterval: -1, QuantileFraction: 0.6,
				ResampleProbability: new(1.5), PerturbationFactors: []float64{1.2, 0}}
		}), want: []string{
			"spec.algorithm.pbt.perturbationFactors[1]: must be a number > 0",
			"spec.algorithm.pbt.perturbationInterval: must be >= 1",
			"spec.algorithm.pbt.quantileFraction: must be in (0, 0.5]",
			"spec.algorithm.pbt.resampleProbability: must be in [0, 1]",
		}},
		"pbt without its settings, population, checkpoint": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.PBT = nil
			e.Spec.Parallelism = 1
			e.Spec.TrialTemplate.Checkpoint = nil
			e.Spec.EarlyStopping.Rule = schemas.EarlyStoppingMedian
		}), want: []string{
			"spec.algorithm.pbt.perturbationInterval: required: algorithm pbt needs the length of a generation, in steps of the objective's stepMetric",
			"spec.earlyStopping.rule: must be none with algorithm pbt: the bottom of the population is replaced instead",
			"spec.parallelism: must be >= 2 with algorithm pbt: it is the population size",
			"spec.trialTemplate.checkpoint.uri: required: algorithm pbt copies checkpoints from trial to trial",
		}},
		"pbt trials not whole generations, fixed resume": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.MaxTrials = 6
			e.Spec.TrialTemplate.Checkpoint.ResumeFrom = "s3://ckpt/old/000000000010"
		}), want: []string{
			"spec.maxTrials: must be a multiple of parallelism (4), at least 2 generations: population × generations",
			"spec.trialTemplate.checkpoint.resumeFrom: not allowed with algorithm pbt: each trial resumes from the checkpoint pbt picks",
		}},
		"pbt without an interval": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.PBT = &schemas.PBTSpec{}
		}), want: []string{"spec.algorithm.pbt.perturbationInterval: must be >= 1"}},
		"pbt settings with another algorithm": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm.PBT = &schemas.PBTSpec{PerturbationInterval: 2}
		}), want: []string{"spec.algorithm.pbt: applies to algorithm pbt only"}},
		"pbt with two objectives": {exp: pbtExp(func(e *schemas.Experiment) {
			e.Spec.Objective = schemas.ObjectiveSpec{}
			e.Spec.Objectives = []schemas.ObjectiveSpec{{Metric: "a", Direction: schemas.Maximize}, {Metric: "b", Direction: schemas.Minimize}}
		}), want: []string{"spec.algorithm.name: pbt searches one objective; with objectives use nsga2, random or grid"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkValidateMessages(t, tc.exp, tc.want)
		})
	}
}

func TestExperimentPBTSettingsDefaults(t *testing.T) {
	e := pbtExp()
	got := e.Spec.PBTSettings()
	if got.QuantileFraction != 0.25 || *got.ResampleProbability != 0.25 || !cmp.Equal(got.PerturbationFactors, []float64{1.2, 0.8}) || got.PerturbationInterval != 2 {
		t.Errorf("PBTSettings() = %+v, want Ray Tune's defaults and interval 2", got)
	}
}
