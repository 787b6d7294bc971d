package workflows

import (
	"fmt"
	"strings"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// This file makes a trial's value out of its reports: spec.objective.aggregate (last,
// best, mean, min, max) over the objective's reports, or, with spec.objective.metrics,
// the weighted sum of each metric's aggregate. With the default (last, one metric) it
// keeps no state and the value is the last report, as it always was.

// metricAgg is what an aggregate keeps of one metric's finite reports in the trial's
// current job.
type metricAgg struct {
	Metric string  `json:"metric"`
	N      int64   `json:"n"`
	Last   float64 `json:"last"`
	Sum    float64 `json:"sum"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func (a *metricAgg) add(v float64) {
	if a.N == 0 || v < a.Min {
		a.Min = v
	}
	if a.N == 0 || v > a.Max {
		a.Max = v
	}
	a.N++
	a.Last = v
	a.Sum += v
}

// value is the aggregate; larger says whether a larger value is the better one (for
// best).
func (a *metricAgg) value(agg schemas.ObjectiveAggregate, larger bool) float64 {
	switch agg {
	case schemas.AggregateMean:
		return a.Sum / float64(a.N)
	case schemas.AggregateMin:
		return a.Min
	case schemas.AggregateMax:
		return a.Max
	case schemas.AggregateBest:
		if larger {
			return a.Max
		}
		return a.Min
	}
	return a.Last
}

// aggOf is the trial's aggregate of metric, added when first needed.
func aggOf(t *TrialState, metric string) *metricAgg {
	for i := range t.Aggs {
		if t.Aggs[i].Metric == metric {
			return &t.Aggs[i]
		}
	}
	t.Aggs = append(t.Aggs, metricAgg{Metric: metric})
	return &t.Aggs[len(t.Aggs)-1]
}

// objectiveAggregate is the single objective's aggregate ("" for several objectives).
func (w *experimentWorkflow) objectiveAggregate() schemas.ObjectiveAggregate {
	if w.exp.Spec.MultiObjective() {
		return ""
	}
	return w.exp.Spec.Objective.Aggregate
}

// reportValue is the trial's value once it has reported v of the objective: v itself
// by default, else the aggregate of its reports so far.
func (w *experimentWorkflow) reportValue(t *TrialState, v float64) float64 {
	agg := w.objectiveAggregate()
	if agg == "" || agg == schemas.AggregateLast {
		return v
	}
	a := aggOf(t, w.exp.Spec.Objective.Metric)
	a.add(v)
	return a.value(agg, w.exp.Spec.Objective.Direction == schemas.Maximize)
}

// componentMetrics are the metrics of a weighted objective (nil for any other).
func (w *experimentWorkflow) componentMetrics() []string {
	if w.exp.Spec.MultiObjective() || !w.exp.Spec.Objective.Weighted() {
		return nil
	}
	out := make([]string, 0, len(w.exp.Spec.Objective.Metrics))
	for _, m := range w.exp.Spec.Objective.Metrics {
		out = append(out, m.Metric)
	}
	return out
}

// addComponents records a weighted objective's component reports: each updates its
// metric's aggregate, and once every metric has one the trial's value is their
// weighted sum, recorded as a report. A NaN or infinite component fails the objective,
// as a NaN objective does.
func (w *experimentWorkflow) addComponents(t *TrialState, run *trialRun, reps []activities.MetricReport) {
	o := &w.exp.Spec.Objective
	if len(reps) == 0 || !o.Weighted() || run.stop == stopPruned || run.stop == stopDiverged {
		return
	}
	for _, r := range reps {
		if r.NonFinite != "" {
			w.requestStop(run, stopDiverged, fmt.Sprintf("failed objective: %s = %s", r.Metric, r.NonFinite))
			return
		}
		aggOf(t, r.Metric).add(r.Value)
		v, ok := w.weightedValue(t)
		if !ok {
			continue
		}
		run.ordinal++
		step := run.ordinal
		if r.Step != nil {
			step = *r.Step
		}
		t.Reports = withReport(t.Reports, step, v)
		t.Value, t.Step = &v, step
	}
}

// weightedValue is the sum of each component's aggregate times its weight; false until
// every component has been reported. A component's best is its largest value when a
// larger one makes the objective better (maximize with a positive weight, minimize with
// a negative one), else its smallest.
func (w *experimentWorkflow) weightedValue(t *TrialState) (float64, bool) {
	o := &w.exp.Spec.Objective
	sum := 0.0
	for _, m := range o.Metrics {
		var a *metricAgg
		for i := range t.Aggs {
			if t.Aggs[i].Metric == m.Metric {
				a = &t.Aggs[i]
			}
		}
		if a == nil || a.N == 0 {
			return 0, false
		}
		larger := (o.Direction == schemas.Maximize) == (m.Weight > 0)
		sum += m.Weight * a.value(o.Aggregate, larger)
	}
	return sum, true
}

// missingComponents names the weighted objective's metrics a trial has not reported,
// or "".
func (w *experimentWorkflow) missingComponents(t *TrialState) string {
	var missing []string
	for _, m := range w.componentMetrics() {
		found := false
		for _, a := range t.Aggs {
			if a.Metric == m && a.N > 0 {
				found = true
			}
		}
		if !found {
			missing = append(missing, m)
		}
	}
	return strings.Join(missing, ", ")
}
