package workflows

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// The Experiment workflow's algorithms beyond TPE and its several objectives: the
// sampler options they read, the other objectives' values, and the Pareto front.

// newerSamplerOptions are the options of cmaes, nsga2 and bohb.
func newerSamplerOptions(spec *schemas.ExperimentSpec) []hpo.Option {
	var opts []hpo.Option
	a := spec.Algorithm
	if a.PopulationSize > 0 {
		opts = append(opts, hpo.PopulationSize(int(a.PopulationSize)))
	}
	if a.Name == schemas.AlgorithmBOHB {
		es := spec.EarlyStopping
		minRes, eta := es.MinResource, int(es.ReductionFactor)
		if minRes <= 0 {
			minRes = 1
		}
		if eta <= 0 {
			eta = 3
		}
		opts = append(opts, hpo.BOHBBudgets(minRes, eta, es.MaxResource))
	}
	return opts
}

// otherMetrics are the objectives after the first, whose values the metric watch
// returns besides the first objective's reports.
func (w *experimentWorkflow) otherMetrics() []string {
	var out []string
	for i, o := range w.exp.Spec.Objectives {
		if i > 0 {
			out = append(out, o.Metric)
		}
	}
	return out
}

// watchedMetrics are the metrics whose latest values the metric watch returns besides
// the first objective's reports: the other objectives and the constraints' metrics.
func (w *experimentWorkflow) watchedMetrics() []string {
	out := w.otherMetrics()
	for _, c := range w.exp.Spec.Constraints {
		out = append(out, c.Metric)
	}
	return out
}

// addOthers records the latest values of the other objectives and of the constraints'
// metrics.
func (w *experimentWorkflow) addOthers(t *TrialState, others map[string]float64) {
	if len(others) == 0 {
		return
	}
	if t.Values == nil {
		t.Values = map[string]float64{}
	}
	for _, m := range w.watchedMetrics() {
		if v, ok := others[m]; ok {
			t.Values[m] = v
		}
	}
}

// missingObjective names the first objective a trial has not reported, or "".
func (w *experimentWorkflow) missingObjective(t *TrialState) string {
	for _, m := range w.otherMetrics() {
		if _, ok := t.Values[m]; !ok {
			return m
		}
	}
	return ""
}

// objectiveValues are a trial's objectives in spec order, or nil when one is missing.
func (w *experimentWorkflow) objectiveValues(t *TrialState) []float64 {
	if !w.exp.Spec.MultiObjective() || t.Value == nil {
		return nil
	}
	vals := []float64{*t.Value}
	for _, m := range w.otherMetrics() {
		v, ok := t.Values[m]
		if !ok {
			return nil
		}
		vals = append(vals, v)
	}
	return vals
}

// trialValues is what the status shows of a trial's objectives: every objective's
// latest value, the first one's included.
func (w *experimentWorkflow) trialValues(t *TrialState) map[string]float64 {
	if !w.exp.Spec.MultiObjective() || (t.Value == nil && len(t.Values) == 0) {
		return nil
	}
	out := make(map[string]float64, len(t.Values)+1)
	for _, m := range w.otherMetrics() { // not ranging over the map: workflow code
		if v, ok := t.Values[m]; ok {
			out[m] = v
		}
	}
	if t.Value != nil {
		out[w.exp.Spec.Objectives[0].Metric] = *t.Value
	}
	return out
}

// addValues gives the trials of h their objective values.
func (w *experimentWorkflow) addValues(h *hpo.History) {
	if !w.exp.Spec.MultiObjective() {
		return
	}
	for i := range h.Trials {
		if id := h.Trials[i].ID; id >= 0 && id < len(w.st.Trials) {
			h.Trials[i].Values = w.objectiveValues(w.st.Trials[id])
		}
	}
}

// paretoFront is the IDs of the completed trials on the Pareto front.
func (w *experimentWorkflow) paretoFront() []int {
	var ids []int
	for _, t := range hpo.ParetoFront(w.allTrialsHistory()) {
		ids = append(ids, t.ID)
	}
	return ids
}

// finishMultiObjective ends a multi-objective search: it succeeds when some trial
// completed with every objective.
func (w *experimentWorkflow) finishMultiObjective(ctx workflow.Context) (ExperimentResult, error) {
	front := w.paretoFront()
	var metrics []string
	for _, o := range w.exp.Spec.Objectives {
		metrics = append(metrics, o.Metric)
	}
	if len(front) == 0 {
		return w.finish(ctx, experimentOutcome{schemas.ExperimentFailed, ReasonNoTrialCompleted,
			fmt.Sprintf("none of the %d trials completed with values of %s", len(w.st.Trials), strings.Join(metrics, ", "))})
	}
	ids := make([]string, len(front))
	for i, id := range front {
		ids[i] = strconv.Itoa(id)
	}
	reason, msg := ReasonMaxTrialsReached, fmt.Sprintf("%d trials ran", len(w.st.Trials))
	if w.st.Exhausted {
		reason, msg = ReasonSearchSpaceExhausted, fmt.Sprintf("every point of the grid ran (%d trials)", len(w.st.Trials))
	}
	return w.finish(ctx, experimentOutcome{schemas.ExperimentSucceeded, reason,
		fmt.Sprintf("%s; Pareto front of %s: trials %s", msg, strings.Join(metrics, ", "), strings.Join(ids, ", "))})
}

// SearchSpaceOf converts a spec's search space to package hpo's, as the Experiment
// workflow does.
func SearchSpaceOf(ps []schemas.ParameterSpec) hpo.Space { return searchSpace(ps) }

// ParamValuesOf is a trial's parameters as the status shows them.
func ParamValuesOf(ps []schemas.ParameterSpec, params map[string]float64) map[string]any {
	w := &experimentWorkflow{exp: &schemas.Experiment{Spec: schemas.ExperimentSpec{SearchSpace: ps}}, space: searchSpace(ps)}
	return w.paramValues(params)
}

// addConstraints gives the Completed trials of h their constraint violations
// (hpo.Trial.Constraints), in spec order; a metric the trial did not report is NaN,
// which hpo counts as infeasible.
func (w *experimentWorkflow) addConstraints(h *hpo.History) {
	cs := w.exp.Spec.Constraints
	if len(cs) == 0 {
		return
	}
	for i := range h.Trials {
		id := h.Trials[i].ID
		if h.Trials[i].State != hpo.TrialCompleted || id < 0 || id >= len(w.st.Trials) {
			continue
		}
		h.Trials[i].Constraints = w.violations(w.st.Trials[id])
	}
}

// violations are a trial's constraint violations in spec order (NaN: not reported).
func (w *experimentWorkflow) violations(t *TrialState) []float64 {
	return w.violationsOf(t.Values)
}

// violationsOf are the constraint violations of metric values (metric → last value),
// in spec order; a metric not in values is NaN.
func (w *experimentWorkflow) violationsOf(values map[string]float64) []float64 {
	cs := w.exp.Spec.Constraints
	out := make([]float64, len(cs))
	for j := range cs {
		v, ok := values[cs[j].Metric]
		if !ok {
			out[j] = math.NaN()
			continue
		}
		out[j] = cs[j].Violation(v)
	}
	return out
}

// trialConstraints is what the status shows of a trial's constraints: each metric's
// latest value and, once the trial completed, whether it was feasible.
func (w *experimentWorkflow) trialConstraints(t *TrialState) (map[string]float64, *bool) {
	cs := w.exp.Spec.Constraints
	if len(cs) == 0 {
		return nil, nil
	}
	var vals map[string]float64
	for _, c := range cs { // not ranging over the map: workflow code
		if v, ok := t.Values[c.Metric]; ok {
			if vals == nil {
				vals = map[string]float64{}
			}
			vals[c.Metric] = v
		}
	}
	if t.Phase != schemas.TrialCompleted {
		return vals, nil
	}
	feasible := w.feasible(t)
	return vals, &feasible
}

// feasible reports whether a trial meets every constraint (true without constraints):
// an infeasible trial that reaches the goal does not end the experiment.
func (w *experimentWorkflow) feasible(t *TrialState) bool {
	if len(w.exp.Spec.Constraints) == 0 {
		return true
	}
	ht := hpo.Trial{Constraints: w.violations(t)}
	return hpo.Feasible(&ht)
}
