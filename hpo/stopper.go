package hpo

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Stopper names accepted by NewStopper.
const (
	StopperNone   = "none"
	StopperMedian = "median"
	StopperASHA   = "asha"
)

// StopperOptions configure the early-stopping rules. Each rule reads only the fields it
// knows.
type StopperOptions struct {
	// StartupTrials is the number of Completed trials the median rule waits for before
	// it stops anything. Default 5.
	StartupTrials int
	// WarmupSteps: the median rule never stops a trial whose latest step is below it.
	// Default 0.
	WarmupSteps int64
	// MinTrials is the number of Completed trials that must have a value at a step for
	// the median rule to judge a trial there. Default 1.
	MinTrials int
	// RunningAverage makes the median rule compare with the median of the other trials'
	// running averages up to the step (the Vizier rule) instead of their values at the
	// step (Optuna's MedianPruner). Default false.
	RunningAverage bool
	// MinResource is the step of ASHA's first rung. Default 1.
	MinResource int64
	// ReductionFactor (η) spaces ASHA's rungs at MinResource·η^k and keeps the top 1/η of
	// the trials at each. Default 3.
	ReductionFactor int
	// MaxResource, when > 0, is the step a trial that is never stopped ends at: ASHA has
	// no rung at or past it. Default 0 (no bound).
	MaxResource int64
	// MaxRungs, when > 0, bounds the number of ASHA rungs. Default 0 (no bound).
	MaxRungs int
	// MinTrialsAtRung is the number of trials, the judged one included, that must have
	// reached an ASHA rung before any is stopped there; until then there is too little
	// to rank by, and a trial that cannot be paused is let through. Default 0, which
	// means ReductionFactor; 1 stops every trial that is not the best so far at a rung
	// with fewer than η trials, as Optuna does.
	MinTrialsAtRung int
}

// StopperOption sets an early-stopping option.
type StopperOption func(*StopperOptions) error

func defaultStopperOptions() StopperOptions {
	return StopperOptions{StartupTrials: 5, MinTrials: 1, MinResource: 1, ReductionFactor: 3}
}

// MedianStartupTrials sets the number of Completed trials before the median rule acts
// (default 5).
func MedianStartupTrials(n int) StopperOption {
	return atLeast("startup trials", n, 0, func(o *StopperOptions) *int { return &o.StartupTrials })
}

// MedianWarmupSteps sets the step below which the median rule never stops (default 0).
func MedianWarmupSteps(n int64) StopperOption {
	return atLeast("warm-up steps", n, 0, func(o *StopperOptions) *int64 { return &o.WarmupSteps })
}

// MedianMinTrials sets how many Completed trials need a value at a step for the median
// rule to judge there (default 1).
func MedianMinTrials(n int) StopperOption {
	return atLeast("min trials", n, 1, func(o *StopperOptions) *int { return &o.MinTrials })
}

// MedianRunningAverage makes the median rule use running averages (default false).
func MedianRunningAverage(on bool) StopperOption {
	return func(o *StopperOptions) error { o.RunningAverage = on; return nil }
}

// ASHAMinResource sets the step of the first rung (default 1).
func ASHAMinResource(r int64) StopperOption {
	return atLeast("min resource", r, 1, func(o *StopperOptions) *int64 { return &o.MinResource })
}

// ASHAReductionFactor sets η (default 3).
func ASHAReductionFactor(eta int) StopperOption {
	return atLeast("reduction factor", eta, 2, func(o *StopperOptions) *int { return &o.ReductionFactor })
}

// ASHAMaxResource sets the step trials end at; no rung is placed at or past it (default
// 0, no bound).
func ASHAMaxResource(r int64) StopperOption {
	return atLeast("max resource", r, 0, func(o *StopperOptions) *int64 { return &o.MaxResource })
}

// ASHAMaxRungs bounds the number of rungs (default 0, no bound).
func ASHAMaxRungs(n int) StopperOption {
	return atLeast("max rungs", n, 0, func(o *StopperOptions) *int { return &o.MaxRungs })
}

// ASHAMinTrialsAtRung sets how many trials must reach a rung before any is stopped there
// (default 0: the reduction factor).
func ASHAMinTrialsAtRung(n int) StopperOption {
	return atLeast("min trials at rung", n, 0, func(o *StopperOptions) *int { return &o.MinTrialsAtRung })
}

// NewStopper returns the early-stopping rule called name: "median", "asha", or "none"
// (also the empty name), which never stops a trial.
func NewStopper(name string, opts ...StopperOption) (Stopper, error) {
	o, err := applyOptions(defaultStopperOptions(), opts)
	if err != nil {
		return nil, err
	}
	switch name {
	case StopperNone, "":
		return NoStopper{}, nil
	case StopperMedian:
		return &MedianStopper{o: o}, nil
	case StopperASHA:
		if o.MinTrialsAtRung == 0 {
			o.MinTrialsAtRung = o.ReductionFactor
		}
		return &ASHAStopper{o: o}, nil
	case StopperHyperband:
		if o.MinTrialsAtRung == 0 {
			o.MinTrialsAtRung = o.ReductionFactor
		}
		return newHyperband(o)
	}
	return nil, fmt.Errorf("%w: stopper %q (want median, asha, hyperband or none)", ErrUnknownAlgorithm, name)
}

// NoStopper never stops a trial.
type NoStopper struct{}

// ShouldStop always reports false.
func (NoStopper) ShouldStop(History, Trial) bool { return false }

// MedianStopper is the median stopping rule (Golovin et al., "Google Vizier", KDD 2017,
// and Optuna's MedianPruner): once StartupTrials trials have completed, a trial at step
// s ≥ WarmupSteps is stopped when its best value so far is worse than the median, over
// the Completed trials that reached s, of their value at s (or of their running average
// up to s).
type MedianStopper struct {
	o StopperOptions
}

var (
	_ Stopper = NoStopper{}
	_ Stopper = (*MedianStopper)(nil)
	_ Stopper = (*ASHAStopper)(nil)
)

// ShouldStop applies the rule at t's latest report.
func (m *MedianStopper) ShouldStop(h History, t Trial) bool {
	n := len(t.Reports)
	if n == 0 {
		return false
	}
	step := t.Reports[n-1].Step
	if step < m.o.WarmupSteps {
		return false
	}
	best := math.Inf(1)
	finite := false
	for _, r := range t.Reports {
		if v := score(h.Direction, r.Value); !math.IsNaN(v) {
			best, finite = math.Min(best, v), true
		}
	}
	if !finite {
		return true // nothing but NaN: it will not get better
	}
	completed := 0
	var vals []float64
	for i := range h.Trials {
		u := &h.Trials[i]
		if u.ID == t.ID || u.State != TrialCompleted {
			continue
		}
		completed++
		if v, ok := m.valueAt(h.Direction, u.Reports, step); ok {
			vals = append(vals, v)
		}
	}
	if completed < m.o.StartupTrials || len(vals) < m.o.MinTrials || len(vals) == 0 {
		return false
	}
	slices.Sort(vals)
	k := len(vals)
	med := vals[k/2]
	if k%2 == 0 {
		med = (vals[k/2-1] + vals[k/2]) / 2
	}
	return best > med
}

// valueAt is a trial's score at step (its latest report at or before it, or the mean of
// its reports up to it), provided the trial reported at step or later.
func (m *MedianStopper) valueAt(d Direction, reps []Report, step int64) (float64, bool) {
	if len(reps) == 0 || reps[len(reps)-1].Step < step {
		return 0, false
	}
	i, _ := slices.BinarySearchFunc(reps, step, func(r Report, s int64) int { return cmp.Compare(r.Step, s) })
	if i < len(reps) && reps[i].Step == step {
		i++
	}
	if i == 0 {
		return 0, false // first report is after step
	}
	if !m.o.RunningAverage {
		v := score(d, reps[i-1].Value)
		return v, !math.IsNaN(v)
	}
	sum, n := 0.0, 0
	for _, r := range reps[:i] {
		if v := score(d, r.Value); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	return sum / float64(max(n, 1)), n > 0
}

// ASHAStopper is asynchronous successive halving (Li et al., "A System for Massively
// Parallel Hyperparameter Tuning", MLSys 2020) as an early-stopping rule: rungs sit at
// steps MinResource·η^k; when a trial's latest report crosses a rung, the trial's value
// there is ranked among the values every trial had when it crossed that rung, and the
// trial goes on only if it is in the top ⌊n/η⌋ of those n. Decisions use what is known
// when the trial arrives, so a trial is judged exactly once per rung, and a trial that
// was let through is never stopped later for the same rung.
type ASHAStopper struct {
	o StopperOptions
}

// Rungs returns the steps of the rungs below limit (MaxResource when it is set).
func (a *ASHAStopper) Rungs(limit int64) []int64 {
	var rs []int64
	for r, k := a.o.MinResource, 0; ; k++ {
		if (a.o.MaxRungs > 0 && k >= a.o.MaxRungs) || (a.o.MaxResource > 0 && r >= a.o.MaxResource) || r > limit {
			return rs
		}
		rs = append(rs, r)
		if r > math.MaxInt64/int64(a.o.ReductionFactor) {
			return rs
		}
		r *= int64(a.o.ReductionFactor)
	}
}

// ShouldStop judges t at every rung its latest report crossed.
func (a *ASHAStopper) ShouldStop(h History, t Trial) bool {
	n := len(t.Reports)
	if n == 0 {
		return false
	}
	last := t.Reports[n-1].Step
	prev := int64(math.MinInt64)
	if n > 1 {
		prev = t.Reports[n-2].Step
	}
	own := score(h.Direction, t.Reports[n-1].Value)
	if math.IsNaN(own) {
		own = math.Inf(1)
	}
	var vals []float64
	for _, rung := range a.Rungs(last) {
		if rung <= prev {
			continue
		}
		vals = append(vals[:0], own)
		for i := range h.Trials {
			u := &h.Trials[i]
			if u.ID == t.ID {
				continue
			}
			if v, ok := rungValue(h.Direction, u.Reports, rung); ok {
				vals = append(vals, v)
			}
		}
		if len(vals) < a.o.MinTrialsAtRung {
			continue
		}
		keep := max(len(vals)/a.o.ReductionFactor, 1)
		slices.Sort(vals)
		if own > vals[keep-1] {
			return true
		}
	}
	return false
}

// rungValue is the score a trial had when it crossed rung: that of its first report at
// or past it.
func rungValue(d Direction, reps []Report, rung int64) (float64, bool) {
	i, _ := slices.BinarySearchFunc(reps, rung, func(r Report, s int64) int { return cmp.Compare(r.Step, s) })
	if i >= len(reps) {
		return 0, false
	}
	v := score(d, reps[i].Value)
	if math.IsNaN(v) {
		v = math.Inf(1)
	}
	return v, true
}
