package workflows_test

import (
	"math"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// A trial's value is the aggregate of what it reported; its reports stay the raw values.
func TestExperimentObjectiveAggregates(t *testing.T) {
	reported := []float64{0.5, 0.9, 0.7, 0.6, 0.8}
	for agg, want := range map[schemas.ObjectiveAggregate]float64{
		"": 0.8, schemas.AggregateLast: 0.8, schemas.AggregateBest: 0.9, schemas.AggregateMean: 0.7,
		schemas.AggregateMin: 0.5, schemas.AggregateMax: 0.9,
	} {
		t.Run(string(agg)+"/maximize", func(t *testing.T) {
			h := newExpHarness(t)
			h.value = func(_ string, e int) float64 { return reported[e-1] }
			h.execute(t, testExperiment(func(e *schemas.Experiment) {
				e.Spec.MaxTrials, e.Spec.Parallelism = 1, 1
				e.Spec.Objective.Aggregate = agg
			}))
			st := h.result(t)
			if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 1 {
				t.Fatalf("phase %s: %s", st.Phase, st.Message)
			}
			tr := st.Trials[0]
			if tr.Value == nil || math.Abs(*tr.Value-want) > 1e-12 || st.BestValue == nil || *st.BestValue != *tr.Value {
				t.Errorf("value %v, best %v, want %v", tr.Value, st.BestValue, want)
			}
			if len(tr.Reports) != 5 || tr.Reports[4].Value != 0.8 || tr.Reports[1].Value != 0.9 {
				t.Errorf("reports %+v: want the reported values", tr.Reports)
			}
		})
	}
	// best follows the direction.
	h := newExpHarness(t)
	h.value = func(_ string, e int) float64 { return reported[e-1] }
	h.execute(t, testExperiment(func(e *schemas.Experiment) {
		e.Spec.MaxTrials, e.Spec.Parallelism = 1, 1
		e.Spec.Objective.Direction = schemas.Minimize
		e.Spec.Objective.Aggregate = schemas.AggregateBest
	}))
	if st := h.result(t); len(st.Trials) != 1 || st.Trials[0].Value == nil || *st.Trials[0].Value != 0.5 {
		t.Errorf("best of a minimized objective: %+v", st.Trials)
	}
}

// A weighted objective's value is the weighted sum of each metric's aggregate; the
// trials never report the objective's own name.
func TestExperimentWeightedObjective(t *testing.T) {
	acc := []float64{0.5, 0.9, 0.7, 0.6, 0.8}
	latency := []float64{100, 80, 120, 90, 110}
	weighted := func(agg schemas.ObjectiveAggregate) func(e *schemas.Experiment) {
		return func(e *schemas.Experiment) {
			e.Spec.MaxTrials, e.Spec.Parallelism = 1, 1
			e.Spec.Objective = schemas.ObjectiveSpec{Metric: "score", Direction: schemas.Maximize, StepMetric: "epoch", Aggregate: agg,
				Metrics: []schemas.WeightedMetric{{Metric: "accuracy", Weight: 1}, {Metric: "latency_ms", Weight: -0.01}}}
		}
	}
	for agg, want := range map[schemas.ObjectiveAggregate]float64{
		schemas.AggregateLast: 0.8 - 1.1,
		schemas.AggregateMean: 0.7 - 1.0,
		// best: the largest accuracy, the smallest latency (its weight is negative).
		schemas.AggregateBest: 0.9 - 0.8,
	} {
		t.Run(string(agg), func(t *testing.T) {
			h := newExpHarness(t)
			h.components = func(_ string, e int) map[string]float64 {
				return map[string]float64{"accuracy": acc[e-1], "latency_ms": latency[e-1]}
			}
			h.execute(t, testExperiment(weighted(agg)))
			st := h.result(t)
			if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 1 {
				t.Fatalf("phase %s: %s", st.Phase, st.Message)
			}
			tr := st.Trials[0]
			if tr.Phase != schemas.TrialCompleted || tr.Value == nil || math.Abs(*tr.Value-want) > 1e-9 {
				t.Errorf("trial %s %q, value %v, want %v", tr.Phase, tr.Message, tr.Value, want)
			}
			if len(tr.Reports) != 5 || tr.Reports[4].Step != 5 {
				t.Errorf("reports %+v: want one per epoch", tr.Reports)
			}
		})
	}
	t.Run("a metric missing", func(t *testing.T) {
		h := newExpHarness(t)
		h.components = func(_ string, e int) map[string]float64 { return map[string]float64{"accuracy": acc[e-1]} }
		h.execute(t, testExperiment(weighted(schemas.AggregateLast), func(e *schemas.Experiment) { e.Spec.MaxTrialRetries = expInt32(0) }))
		st := h.result(t)
		if len(st.Trials) != 1 || st.Trials[0].Phase != schemas.TrialFailed ||
			!strings.Contains(st.Trials[0].Message, "succeeded without reporting latency_ms (of the weighted objective score)") {
			t.Errorf("trials %+v", st.Trials)
		}
	})
}
