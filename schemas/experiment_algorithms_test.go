package schemas_test

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestExperimentNewAlgorithmsValidate(t *testing.T) {
	twoObjectives := func(e *schemas.Experiment) {
		e.Spec.Objective = schemas.ObjectiveSpec{}
		e.Spec.Objectives = []schemas.ObjectiveSpec{
			{Metric: "accuracy", Direction: schemas.Maximize},
			{Metric: "latency", Direction: schemas.Minimize},
		}
	}
	cases := map[string]struct {
		exp  *schemas.Experiment
		want []string
	}{
		"cmaes": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmCMAES, PopulationSize: 8}
		})},
		"gp with startup trials": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmGP, StartupTrials: expI32(5)}
		})},
		"bohb with hyperband defaulted": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmBOHB}
			e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{MaxResource: 27}
		})},
		"hyperband needs max resource and its rule": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmHyperband, PopulationSize: 4}
			e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingASHA}
		}), want: []string{
			"spec.algorithm.populationSize: applies to algorithms cmaes and nsga2 only",
			"spec.earlyStopping.rule: must be hyperband (or unset) with algorithm hyperband",
		}},
		"rule hyperband without max resource": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingHyperband}
		}), want: []string{
			"spec.earlyStopping.maxResource: required by hyperband: the step at which a trial that is never stopped ends",
		}},
		"cmaes with only categoricals": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmCMAES, PopulationSize: 1}
			e.Spec.SearchSpace = e.Spec.SearchSpace[2:3]
			e.Spec.TrialTemplate.Command = []string{"trainer"}
			e.Spec.TrialTemplate.Args = []string{"--batch-size=${params.batch_size}"}
			e.Spec.TrialTemplate.Env = nil
		}), want: []string{
			"spec.algorithm.name: cmaes needs at least one int or float parameter",
			"spec.algorithm.populationSize: must be >= 2 (0 for the default)",
		}},
		"two objectives": {exp: testExp(twoObjectives)},
		"objectives with nsga2": {exp: testExp(twoObjectives, func(e *schemas.Experiment) {
			e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmNSGA2, PopulationSize: 10}
		})},
		"objective and objectives, tpe, asha, goal, duplicates": {exp: testExp(twoObjectives, func(e *schemas.Experiment) {
			e.Spec.Objective = schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize}
			e.Spec.Objectives = append(e.Spec.Objectives, schemas.ObjectiveSpec{Metric: "latency", Direction: schemas.Minimize, Goal: new(1.0), StepMetric: "epoch"})
			e.Spec.Algorithm.Name = schemas.AlgorithmTPE
			e.Spec.EarlyStopping.Rule = schemas.EarlyStoppingASHA
		}), want: []string{
			"spec.algorithm.name: tpe searches one objective; with objectives use nsga2, random or grid",
			"spec.earlyStopping.rule: must be none with several objectives",
			"spec.objective: give either objective or objectives, not both",
			"spec.objectives[2].goal: not allowed with several objectives",
			"spec.objectives[2].metric: duplicate metric \"latency\" (first at spec.objectives[1])",
			"spec.objectives[2].stepMetric: only the first objective's stepMetric numbers the reports",
		}},
		"one objective in objectives, without a direction": {exp: testExp(twoObjectives, func(e *schemas.Experiment) {
			e.Spec.Objectives = e.Spec.Objectives[:1]
			e.Spec.Objectives[0].Direction = ""
		}), want: []string{
			"spec.objectives: must have at least 2 objectives (use objective for one)",
			"spec.objectives[0].direction: required",
		}},
		"neither objective nor objectives": {exp: testExp(func(e *schemas.Experiment) {
			e.Spec.Objective = schemas.ObjectiveSpec{}
		}), want: []string{"spec.objective.direction: required", "spec.objective.metric: required"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkValidateMessages(t, tc.exp, tc.want)
		})
	}
}

func TestExperimentNewAlgorithmsDefault(t *testing.T) {
	e := testExp(func(e *schemas.Experiment) {
		e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmBOHB}
		e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{MaxResource: 27}
	})
	e.Default()
	if es := e.Spec.EarlyStopping; es.Rule != schemas.EarlyStoppingHyperband || es.MinResource != 1 || es.ReductionFactor != 3 {
		t.Errorf("bohb defaults: early stopping %+v, want hyperband, 1, 3", es)
	}
	if errs := e.Validate(); errs != nil {
		t.Errorf("defaulted bohb spec: %v", errs)
	}
	m := testExp(func(e *schemas.Experiment) {
		e.Spec.Objective = schemas.ObjectiveSpec{}
		e.Spec.Objectives = []schemas.ObjectiveSpec{{Metric: "a", Direction: schemas.Maximize}, {Metric: "b", Direction: schemas.Minimize}}
	})
	m.Default()
	if m.Spec.Algorithm.Name != schemas.AlgorithmNSGA2 || m.Spec.Objectives[0].StepMetric != "step" || m.Spec.Objective.Metric != "" {
		t.Errorf("objectives defaults: algorithm %q, stepMetric %q, objective %+v", m.Spec.Algorithm.Name, m.Spec.Objectives[0].StepMetric, m.Spec.Objective)
	}
	if errs := m.Validate(); errs != nil {
		t.Errorf("defaulted multi-objective spec: %v", errs)
	}
	if p := m.Spec.PrimaryObjective(); p.Metric != "a" {
		t.Errorf("PrimaryObjective = %q, want a", p.Metric)
	}
}
