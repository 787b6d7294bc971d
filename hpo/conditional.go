package hpo

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Conditional search spaces (Optuna's define-by-run spaces, Katib's and Ray Tune's
// conditional parameters): a parameter with a Condition is active only when the
// parameter it names, which comes earlier in the space, is active and has a value the
// condition accepts: momentum only when optimizer is sgd, width3 only when layers ≥ 3.
// Conditions nest (a conditional parameter may condition a later one).
//
// Samplers still suggest a value for every parameter, so that each trial is a point of
// the whole space (CMA-ES, GP and NSGA-II model it as such: their documented fallback);
// the trial's job sees only the active ones (Active). TPE, which models each parameter
// on its own, learns a parameter only from the trials in which it was active, as
// Optuna's independent TPE does on a define-by-run space.

// Condition is when a parameter is active: Param (an earlier parameter) has one of
// Values (a categorical parameter's choice indexes, or an int's values), or a value in
// [Min, Max] (either bound may be absent). At least one of Values, Min and Max is set.
type Condition struct {
	Param    string
	Values   []float64
	Min, Max *float64
}

// holds reports whether value v of the parent parameter satisfies the condition.
func (c *Condition) holds(v float64) bool {
	if len(c.Values) > 0 && !slices.Contains(c.Values, v) {
		return false
	}
	return (c.Min == nil || v >= *c.Min) && (c.Max == nil || v <= *c.Max)
}

// Active returns, in space order, whether each parameter of space is active for params
// (a parameter without a Condition always is).
func Active(space Space, params map[string]float64) []bool {
	active := make([]bool, len(space))
	index := make(map[string]int, len(space))
	for i, p := range space {
		index[p.Name] = i
		c := p.Condition
		if c == nil {
			active[i] = true
			continue
		}
		j, ok := index[c.Param]
		if !ok || !active[j] {
			continue
		}
		v, ok := params[c.Param]
		active[i] = ok && c.holds(v)
	}
	return active
}

// ActiveParams returns the active parameters of params (a new map).
func ActiveParams(space Space, params map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(params))
	for i, on := range Active(space, params) {
		if v, ok := params[space[i].Name]; on && ok {
			out[space[i].Name] = v
		}
	}
	return out
}

// validateCondition checks parameter i's condition against the parameters before it.
func validateCondition(space Space, i int) error {
	c := space[i].Condition
	if c == nil {
		return nil
	}
	parent := -1
	for j := range i {
		if space[j].Name == c.Param {
			parent = j
		}
	}
	if parent < 0 {
		return fmt.Errorf("condition: parameter %q is not an earlier parameter", c.Param)
	}
	if len(c.Values) == 0 && c.Min == nil && c.Max == nil {
		return errors.New("condition: give values, min or max")
	}
	pp := space[parent]
	for _, v := range c.Values {
		switch pp.Type {
		case Categorical:
			if v != math.Trunc(v) || v < 0 || int(v) >= len(pp.Values) {
				return fmt.Errorf("condition: %v is not a choice of %q", v, pp.Name)
			}
		case Int:
			if v != math.Trunc(v) || v < pp.Min || v > pp.Max {
				return fmt.Errorf("condition: %v is not a value of %q", v, pp.Name)
			}
		default:
			return fmt.Errorf("condition: values needs a categorical or int parameter; %q is a float (use min and max)", pp.Name)
		}
	}
	if (c.Min != nil || c.Max != nil) && pp.Type == Categorical {
		return fmt.Errorf("condition: min and max need a numeric parameter; %q is categorical (use values)", pp.Name)
	}
	if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
		return errors.New("condition: min is above max")
	}
	return nil
}

// activeIn reports whether dims[i] is active in params, walking its conditions up to a
// parameter without one.
func activeIn(dims []dim, i int, params map[string]float64) bool {
	for d := &dims[i]; d.parent >= 0; d = &dims[d.parent] {
		v, ok := params[dims[d.parent].p.Name]
		if !ok || !d.p.Condition.holds(v) {
			return false
		}
	}
	return true
}

// conditional reports whether a parameter of dims has a condition.
func conditional(dims []dim) bool {
	for i := range dims {
		if dims[i].parent >= 0 {
			return true
		}
	}
	return false
}
