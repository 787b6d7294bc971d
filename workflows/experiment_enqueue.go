package workflows

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// Trials the user enqueues (Optuna's enqueue_trial): the enqueue update appends
// parameter sets to ExperimentState.Queue, which continue-as-new carries; the next new
// trials take them, first in first out, before asking the sampler. They count towards
// maxTrials, and the sampler sees them, once they ran, like any other trial.

// EnqueueRequest asks an experiment to run these parameter sets next. Each gives a value
// for every search-space parameter: a number for int and float parameters (a numeric
// string is read as one), one of the values of a categorical parameter.
type EnqueueRequest struct {
	Trials []map[string]any `json:"trials"`
}

// QueuedTrial is one enqueued parameter set, in the sampler's values (a categorical
// parameter's as the index of its choice).
type QueuedTrial struct {
	Params map[string]float64 `json:"params"`
}

// MaxEnqueue bounds the trials of one enqueue request.
const MaxEnqueue = 100

// validateEnqueue refuses an enqueue request that the experiment cannot take: ended,
// pbt (its population decides its trials), more trials than maxTrials leaves, or a
// parameter set that is not a point of the search space. Errors about a parameter set
// start with its field path (trials[1].lr: ...).
func (w *experimentWorkflow) validateEnqueue(req EnqueueRequest) error {
	switch {
	case w.st.Phase.Terminal() || w.ending != nil:
		return fmt.Errorf("the experiment has ended (%s)", w.st.Phase)
	case w.exp.Spec.Algorithm.Name == schemas.AlgorithmPBT:
		return errors.New("algorithm pbt decides its trials from its population: trials cannot be enqueued")
	case len(req.Trials) == 0:
		return errors.New("trials: give at least one parameter set")
	case len(req.Trials) > MaxEnqueue:
		return fmt.Errorf("trials: at most %d per request", MaxEnqueue)
	}
	if left := w.st.MaxTrials - len(w.st.Trials) - len(w.st.Queue); len(req.Trials) > left {
		return fmt.Errorf("trials: %d enqueued but maxTrials (%d) leaves room for %d more; extend the experiment first",
			len(req.Trials), w.st.MaxTrials, max(left, 0))
	}
	for i, set := range req.Trials {
		if _, err := w.queuedParams(set); err != nil {
			return fmt.Errorf("trials[%d].%w", i, err)
		}
	}
	return nil
}

// handleEnqueue appends the request's parameter sets to the queue.
func (w *experimentWorkflow) handleEnqueue(_ workflow.Context, req EnqueueRequest) (ExperimentUpdateResult, error) {
	for _, set := range req.Trials {
		p, err := w.queuedParams(set)
		if err != nil { // the validator checked it
			return ExperimentUpdateResult{}, err
		}
		w.st.Queue = append(w.st.Queue, QueuedTrial{Params: p})
	}
	w.changed = true
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

// popQueued takes the first enqueued parameter set, if any.
func (w *experimentWorkflow) popQueued() (QueuedTrial, bool) {
	if len(w.st.Queue) == 0 {
		return QueuedTrial{}, false
	}
	q := w.st.Queue[0]
	w.st.Queue = w.st.Queue[1:]
	return q, true
}

// queuedParams converts one user parameter set to the sampler's values. Its error
// starts with the parameter's name.
func (w *experimentWorkflow) queuedParams(set map[string]any) (map[string]float64, error) {
	space := w.exp.Spec.SearchSpace
	out, err := w.pointOf(set)
	if err != nil {
		return nil, err
	}
	for _, k := range enqueuedNames(set) {
		if !slices.ContainsFunc(space, func(p schemas.ParameterSpec) bool { return p.Name == k }) {
			return nil, fmt.Errorf("%s: not a parameter of the search space", k)
		}
	}
	return out, nil
}

// parameterValue reads a user's value of parameter ps as the sampler's value.
func parameterValue(ps schemas.ParameterSpec, v any) (float64, error) {
	if ps.Type == schemas.ParameterCategorical {
		for i, c := range ps.Values {
			if fmt.Sprint(c.JSONValue()) == fmt.Sprint(v) {
				return float64(i), nil
			}
		}
		return 0, fmt.Errorf("%v is not one of the parameter's values", v)
	}
	var x float64
	switch n := v.(type) {
	case float64:
		x = n
	case int:
		x = float64(n)
	case string:
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", n)
		}
		x = f
	default:
		return 0, fmt.Errorf("%v is not a number", v)
	}
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return 0, errors.New("must be a finite number")
	case ps.Min != nil && x < *ps.Min, ps.Max != nil && x > *ps.Max:
		return 0, fmt.Errorf("%g is outside [%g, %g]", x, deref(ps.Min), deref(ps.Max))
	case ps.Type == schemas.ParameterInt && x != math.Trunc(x):
		return 0, fmt.Errorf("%g is not an integer", x)
	}
	return x, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// enqueuedNames returns a parameter set's names in order (workflowcheck exempts it: it
// ranges over the map, then sorts).
func enqueuedNames(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pointOf reads a user's parameter set as a point of the search space: every active
// parameter must be given, with a value inside it (the error starts with its name); an
// inactive one (its condition does not hold) may be left out and is then given its
// range's middle or its first choice, so that the samplers see a whole point.
func (w *experimentWorkflow) pointOf(set map[string]any) (map[string]float64, error) {
	space := w.exp.Spec.SearchSpace
	out := make(map[string]float64, len(space))
	for _, ps := range space {
		v, ok := set[ps.Name]
		if !ok {
			continue
		}
		x, err := parameterValue(ps, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ps.Name, err)
		}
		out[ps.Name] = x
	}
	for i, on := range hpo.Active(w.space, out) {
		ps := space[i]
		if _, ok := out[ps.Name]; ok {
			continue
		}
		if on {
			return nil, fmt.Errorf("%s: required (give every active parameter)", ps.Name)
		}
		out[ps.Name] = inactiveValue(w.space[i])
	}
	return out, nil
}

// inactiveValue is what an inactive parameter left out of a parameter set gets: the
// middle of its range (on its grid for an int), or its first choice.
func inactiveValue(p hpo.Param) float64 {
	switch p.Type {
	case hpo.Categorical:
		return 0
	case hpo.Int:
		return math.Round((p.Min + p.Max) / 2)
	}
	return (p.Min + p.Max) / 2
}
