package hpo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxValues bounds how many values a quantised parameter (an int, or a float with a
// step) may take: 2^40, as many as a grid may have in all.
const MaxValues = 1 << 40

// ErrInvalidSpace is wrapped by every error Validate returns.
var ErrInvalidSpace = errors.New("hpo: invalid search space")

// Validate checks a search space and returns an error naming the first parameter that is
// wrong: names must be present and unique, numeric bounds finite with Min < Max and a
// finite Max-Min, a log
// scale needs Min > 0, a step must be > 0 and <= Max-Min (and whole for an int, whose
// bounds must be whole too), and a categorical parameter needs at least one value and no
// value twice.
func Validate(space Space) error {
	if len(space) == 0 {
		return fmt.Errorf("%w: no parameters", ErrInvalidSpace)
	}
	seen := make(map[string]bool, len(space))
	for i, p := range space {
		if p.Name == "" {
			return fmt.Errorf("%w: parameter %d has no name", ErrInvalidSpace, i)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: parameter %q is defined twice", ErrInvalidSpace, p.Name)
		}
		seen[p.Name] = true
		if err := validateParam(p); err != nil {
			return fmt.Errorf("%w: parameter %q: %w", ErrInvalidSpace, p.Name, err)
		}
		if err := validateCondition(space, i); err != nil {
			return fmt.Errorf("%w: parameter %q: %w", ErrInvalidSpace, p.Name, err)
		}
	}
	return nil
}

func validateParam(p Param) error {
	switch p.Type {
	case Categorical:
		if len(p.Values) == 0 {
			return errors.New("categorical needs at least one value")
		}
		vals := make(map[string]bool, len(p.Values))
		for _, v := range p.Values {
			if vals[v] {
				return fmt.Errorf("categorical value %q is listed twice", v)
			}
			vals[v] = true
		}
		return nil
	case Int, Float:
	default:
		return fmt.Errorf("unknown type %q (want int, float or categorical)", p.Type)
	}
	if !finite(p.Min) || !finite(p.Max) {
		return fmt.Errorf("bounds must be finite (min %v, max %v)", p.Min, p.Max)
	}
	if !(p.Min < p.Max) {
		return fmt.Errorf("min %v must be < max %v", p.Min, p.Max)
	}
	if math.IsInf(p.Max-p.Min, 0) {
		// Samplers scale by the width: an infinite one turns every suggestion into NaN.
		return fmt.Errorf("the range max-min (%v - %v) must be finite", p.Max, p.Min)
	}
	if p.Log && !(p.Min > 0) {
		return fmt.Errorf("log scale needs min > 0 (min is %v)", p.Min)
	}
	if math.IsNaN(p.Step) || p.Step < 0 || math.IsInf(p.Step, 0) {
		return fmt.Errorf("step %v must be > 0 (or 0 for none)", p.Step)
	}
	if p.Step > p.Max-p.Min {
		return fmt.Errorf("step %v must be <= max-min (%v)", p.Step, p.Max-p.Min)
	}
	// Quantised values are Min + k*step (step 1 for an int without one); k must fit
	// the samplers' integers.
	q := p.Step
	if p.Type == Int && q == 0 {
		q = 1
	}
	if q > 0 && (p.Max-p.Min)/q >= MaxValues {
		return fmt.Errorf("[min, max] holds more than 2^40 values of step %v; use a larger step", q)
	}
	if p.Type == Int {
		if p.Min != math.Trunc(p.Min) || p.Max != math.Trunc(p.Max) {
			return fmt.Errorf("int bounds must be whole numbers (min %v, max %v)", p.Min, p.Max)
		}
		if p.Step != math.Trunc(p.Step) {
			return fmt.Errorf("int step %v must be a whole number", p.Step)
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Format renders params in the string form substituted for ${params.NAME} in a trial's
// spec: an int without decimals, a float in strconv's shortest 'g' form, a categorical
// parameter as its chosen value. Parameters of space missing from params, and categorical
// indices out of range, are left out.
func Format(space Space, params map[string]float64) map[string]string {
	out := make(map[string]string, len(space))
	for _, p := range space {
		v, ok := params[p.Name]
		if !ok {
			continue
		}
		switch p.Type {
		case Int:
			out[p.Name] = strconv.FormatInt(int64(math.Round(v)), 10)
		case Categorical:
			i := int(math.Round(v))
			if i < 0 || i >= len(p.Values) || math.IsNaN(v) {
				continue
			}
			out[p.Name] = p.Values[i]
		default:
			out[p.Name] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return out
}

// Best returns the Completed trial with the best Value for h.Direction (minimise unless
// Maximize), the lowest ID on a tie. It reports false when no trial has completed with a
// value. Pruned trials are not candidates: their value is an intermediate one; nor are
// infeasible ones (constraints.go).
func Best(h History) (Trial, bool) {
	var best Trial
	found := false
	for _, t := range h.Trials {
		if t.State != TrialCompleted || t.Value == nil || math.IsNaN(score(h.Direction, *t.Value)) || !Feasible(&t) {
			continue
		}
		if !found {
			best, found = t, true
			continue
		}
		s, bs := score(h.Direction, *t.Value), score(h.Direction, *best.Value)
		if s < bs || (s == bs && t.ID < best.ID) {
			best = t
		}
	}
	return best, found
}

// score maps an objective value to one that is minimised. A value that is not finite
// (NaN, or an infinity: a diverged trainer) is a failed objective, never a best one: its
// score is NaN, which every caller ranks last or leaves out.
func score(d Direction, v float64) float64 {
	if math.IsInf(v, 0) {
		return math.NaN()
	}
	if d == Maximize {
		return -v
	}
	return v
}

// dim is a parameter prepared for sampling: its internal coordinate (the log of the value
// on a log scale), its grid when quantised, and the bounds of the internal domain. A
// quantised dimension's domain is widened by half a step at each end so that the end
// values get the same share of it as the others.
type dim struct {
	p      Param
	salt   uint64
	cat    bool
	n      int     // number of categories
	q      float64 // step (ints default to 1); 0 for a continuous float
	kmax   int     // quantised values are Min + k*q for k in [0, kmax]
	maxv   float64 // largest value on the grid (Max when continuous)
	dec    int     // decimals to round a quantised float to; -1 for none
	lo, hi float64
	parent int // index of the parameter p.Condition names; -1 without a condition
}

func newDims(space Space) ([]dim, error) {
	if err := Validate(space); err != nil {
		return nil, err
	}
	dims := make([]dim, len(space))
	for i, p := range space {
		d := dim{p: p, salt: hashString(p.Name), dec: -1, parent: -1}
		if p.Condition != nil {
			for j := range i {
				if space[j].Name == p.Condition.Param {
					d.parent = j
				}
			}
		}
		if p.Type == Categorical {
			d.cat, d.n = true, len(p.Values)
			d.lo, d.hi = 0, float64(d.n)
			dims[i] = d
			continue
		}
		d.q = p.Step
		if p.Type == Int && d.q == 0 {
			d.q = 1
		}
		d.maxv = p.Max
		if d.q > 0 {
			d.kmax = int(math.Floor((p.Max-p.Min)/d.q + 1e-9))
			d.maxv = p.Min + float64(d.kmax)*d.q
			if p.Type == Float {
				d.dec = max(decimals(p.Min), decimals(d.q))
				d.maxv = d.round(d.maxv)
			}
			if d.maxv > p.Max {
				d.maxv = p.Max
			}
		}
		switch {
		case d.q == 0:
			d.lo, d.hi = d.t(p.Min), d.t(p.Max)
		case !p.Log:
			d.lo, d.hi = p.Min-d.q/2, d.maxv+d.q/2
		default:
			if p.Min-d.q/2 > 0 {
				d.lo = math.Log(p.Min - d.q/2)
			} else {
				d.lo = math.Log(p.Min) - (math.Log(p.Min+d.q)-math.Log(p.Min))/2
			}
			d.hi = math.Log(d.maxv + d.q/2)
		}
		dims[i] = d
	}
	return dims, nil
}

// decimals is the number of digits after the point in x's shortest decimal form, or a
// large number when x needs more than 15.
func decimals(x float64) int {
	s := strconv.FormatFloat(math.Abs(x), 'f', -1, 64)
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return 0
	}
	if n := len(s) - i - 1; n <= 15 {
		return n
	}
	return 99
}

// round removes the binary noise of Min + k*Step (0.30000000000000004 becomes 0.3).
func (d *dim) round(v float64) float64 {
	if d.dec < 0 || d.dec > 15 {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', d.dec, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// t maps a value to the internal coordinate.
func (d *dim) t(v float64) float64 {
	if d.p.Log {
		return math.Log(v)
	}
	return v
}

// index returns the grid index of a value of a quantised dimension.
func (d *dim) index(v float64) int {
	k := int(math.Round((v - d.p.Min) / d.q))
	return min(max(k, 0), d.kmax)
}

// valueAt is the value of grid index k.
func (d *dim) valueAt(k int) float64 {
	v := d.p.Min + float64(k)*d.q
	if d.p.Type == Int {
		return math.Round(v)
	}
	return min(d.round(v), d.maxv)
}

// value maps an internal coordinate back to a legal value: clamped to the bounds and
// snapped to the grid.
func (d *dim) value(x float64) float64 {
	v := x
	if d.p.Log {
		v = math.Exp(x)
	}
	if d.q > 0 {
		return d.valueAt(d.index(v))
	}
	return min(max(v, d.p.Min), d.p.Max)
}

// bin returns the internal interval of the domain that rounds to grid index k.
func (d *dim) bin(k int) (float64, float64) {
	a, b := d.lo, d.hi
	v := d.p.Min + float64(k)*d.q
	if k > 0 {
		a = d.t(v - d.q/2)
	}
	if k < d.kmax {
		b = d.t(v + d.q/2)
	}
	return a, b
}

// observed returns the internal coordinate of a value found in the history, and false
// when the value cannot belong to this dimension (the space changed, or it is corrupt).
func (d *dim) observed(params map[string]float64) (float64, bool) {
	v, ok := params[d.p.Name]
	if !ok || math.IsNaN(v) {
		return 0, false
	}
	if d.cat {
		i := math.Round(v)
		if i != v || i < 0 || int(i) >= d.n {
			return 0, false
		}
		return i, true
	}
	tol := 1e-9 * (d.p.Max - d.p.Min)
	if v < d.p.Min-tol || v > d.p.Max+tol {
		return 0, false
	}
	if d.q > 0 {
		return d.t(d.valueAt(d.index(v))), true
	}
	return d.t(min(max(v, d.p.Min), d.p.Max)), true
}

// uniform draws a value uniformly on the dimension's scale.
func (d *dim) uniform(r *rng) float64 {
	switch {
	case d.cat:
		return float64(r.intn(d.n))
	case d.q > 0 && !d.p.Log:
		return d.valueAt(r.intn(d.kmax + 1))
	default:
		return d.value(d.lo + r.float64()*(d.hi-d.lo))
	}
}
