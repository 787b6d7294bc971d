package schemas_test

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// spec.constraints is validated with field paths: a bound is required, bounds are
// ordered and finite-valued, a metric is not repeated nor an objective, and the tags
// (pattern, at most 8) hold; a valid list passes and reaches the spec.
func TestExperimentConstraintsValidation(t *testing.T) {
	base := `apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: c, workspace: ws}
spec:
  searchSpace: [{name: lr, type: float, min: 0.001, max: 0.1}]
  objective: {metric: loss, direction: minimize}
  maxTrials: 4
  trialTemplate: {framework: custom, command: [python, train.py], roles: {worker: {replicas: 1}}}
`
	cases := []struct {
		name, constraints, want string
	}{
		{"valid", `[{metric: peak_memory_gb, max: 16}, {metric: latency_ms, min: 0, max: 50}]`, ""},
		{"no bound", `[{metric: peak_memory_gb}]`, "spec.constraints[0]: give max, min or both"},
		{"min above max", `[{metric: m, min: 5, max: 1}]`, "spec.constraints[0].min: must not be above max"},
		{"duplicate", `[{metric: m, max: 1}, {metric: m, max: 2}]`, "spec.constraints[1].metric: duplicate metric"},
		{"objective", `[{metric: loss, max: 1}]`, "spec.constraints[0].metric: \"loss\" is an objective"},
		{"step metric", `[{metric: step, max: 1}]`, "spec.constraints[0].metric: \"step\" is an objective or the step metric"},
		{"no metric", `[{max: 1}]`, "spec.constraints[0].metric"},
		{"bad name", `[{metric: "a b", max: 1}]`, "spec.constraints[0].metric"},
		{"too many", `[{metric: a, max: 1}, {metric: b, max: 1}, {metric: c, max: 1}, {metric: d, max: 1}, {metric: e, max: 1}, {metric: f, max: 1}, {metric: g, max: 1}, {metric: h, max: 1}, {metric: i, max: 1}]`, "spec.constraints"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := base + "  constraints: " + c.constraints + "\n"
			exp, err := schemas.DecodeValid([]byte(doc), schemas.DecodeExperiment)
			if c.want == "" {
				if err != nil {
					t.Fatalf("valid constraints refused: %v", err)
				}
				if len(exp.Spec.Constraints) != 2 || *exp.Spec.Constraints[0].Max != 16 {
					t.Fatalf("constraints = %+v", exp.Spec.Constraints)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Violation is the distance outside the bounds, 0 within them.
func TestConstraintViolation(t *testing.T) {
	hi, lo := 16.0, 2.0
	c := schemas.ConstraintSpec{Metric: "m", Max: &hi, Min: &lo}
	for v, want := range map[float64]float64{10: 0, 16: 0, 18: 2, 2: 0, 0.5: 1.5} {
		if got := c.Violation(v); got != want {
			t.Errorf("violation of %v = %v, want %v", v, got, want)
		}
	}
}

// searchSpace[].condition is validated with field paths.
func TestParameterConditionValidation(t *testing.T) {
	doc := func(space, algorithm string) string {
		return `apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: c, workspace: ws}
spec:
  searchSpace:
    - {name: optimizer, type: categorical, values: [sgd, adam]}
    - {name: layers, type: int, min: 1, max: 4}
    - {name: lr, type: float, min: 0.001, max: 0.1}
` + space + `
  objective: {metric: loss, direction: minimize}
  algorithm: {name: ` + algorithm + `}
  maxTrials: 4
  trialTemplate: {framework: custom, command: [python, train.py], roles: {worker: {replicas: 1}}}
`
	}
	cases := []struct{ name, space, algorithm, want string }{
		{"valid", `    - {name: momentum, type: float, min: 0, max: 1, condition: {parameter: optimizer, in: [sgd]}}
    - {name: width3, type: int, min: 8, max: 64, condition: {parameter: layers, min: 3}}
    - {name: nesterov, type: categorical, values: ["true", "false"], condition: {parameter: momentum, min: 0.5}}`, "tpe", ""},
		{"later parent", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: later, in: [a]}}
    - {name: later, type: categorical, values: [a]}`, "tpe", "spec.searchSpace[3].condition.parameter: \"later\" is not an earlier parameter"},
		{"not a choice", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: optimizer, in: [rmsprop]}}`, "tpe", "spec.searchSpace[3].condition.in[0]: \"rmsprop\" is not a value of optimizer"},
		{"not an int value", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: layers, in: [9]}}`, "tpe", "spec.searchSpace[3].condition.in[0]"},
		{"in on a float", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: lr, in: [0.01]}}`, "tpe", "spec.searchSpace[3].condition.in: needs a categorical or int parameter"},
		{"min on categorical", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: optimizer, min: 1}}`, "tpe", "spec.searchSpace[3].condition: min and max need a numeric parameter"},
		{"empty", `    - {name: m, type: float, min: 0, max: 1, condition: {parameter: layers}}`, "tpe", "spec.searchSpace[3].condition: give in, min or max"},
		{"grid", `    - {name: m, type: int, min: 0, max: 1, condition: {parameter: layers, min: 2}}`, "grid", "spec.searchSpace[3].condition: algorithm grid needs every parameter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := schemas.DecodeValid([]byte(doc(c.space, c.algorithm)), schemas.DecodeExperiment)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}
