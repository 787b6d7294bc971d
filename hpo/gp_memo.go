package hpo

import (
	"math/bits"
	"slices"
	"sync"
)

// gpFitSize is how many of n modelled observations (the first, in ID order) the GP's
// hyper-parameters are fitted to: all of them below 32, then n rounded down to a
// multiple of 2^(⌊log₂ n⌋ − 3), so that they are refitted 8 times per doubling of the
// history (every 4 trials from 32, 8 from 64, 16 from 128, 32 from 256, …) rather
// than on every suggestion. Between refits the model conditions on every observation
// with the hyper-parameters of the last refit. It is a function of n alone, so the
// hyper-parameters stay a function of the history.
func gpFitSize(n int) int {
	if n < 32 {
		return n
	}
	step := gpFitStep(n)
	return n / step * step
}

// gpFitStep is the distance between the refit sizes around n (32 ≤ n).
func gpFitStep(n int) int {
	return 1 << (bits.Len(uint(n)) - 4)
}

// gpMemo remembers the hyper-parameters of the GP sampler's last fits, keyed by
// exactly the data they were fitted to (the categorical flags, the inputs and the
// values, bit for bit). The fit is a pure function of that data (fitGPTheta), so a hit
// returns what a fit would compute: the memo changes no suggestion, it only saves the
// refits between two refit sizes (gpFitSize), the objective's and each constraint's.
//
// Like cmaMemo, it lives in the sampler object, which serves one experiment; its mutex
// is only ever tried (Suggest), so a concurrent second caller fits without the memo.
type gpMemo struct {
	mu      sync.Mutex
	fits    []gpFit // newest first, at most gpMemoFits
	pending []gpFit // fits under way (advance), theta nil
}

// gpMemoFits is how many fits the memo keeps: the ones in use and the ones done ahead
// (advance), the objective's and each constraint's, so 2·(1 + constraints); 32 leaves
// room for 15 constraints.
const gpMemoFits = 32

// gpFit is one fit: its data and the hyper-parameters it gave, or, while pending, the
// BFGS under way.
type gpFit struct {
	cat   []bool
	xs    [][]float64
	ys    []float64
	theta []float64
	run   *bfgs // pending only
}

// theta returns fitGPTheta(cat, xs, ys), from the memo when it holds a fit of exactly
// this data. A nil memo fits every time.
func (m *gpMemo) theta(cat []bool, xs [][]float64, ys []float64) []float64 {
	if m == nil {
		return fitGPTheta(cat, xs, ys)
	}
	for i, f := range m.fits {
		if f.same(cat, xs, ys) {
			copy(m.fits[1:i+1], m.fits[:i]) // most recently used first
			m.fits[0] = f
			return slices.Clone(f.theta)
		}
	}
	for i, f := range m.pending {
		if f.same(cat, xs, ys) { // a fit spread over the calls before: finish it
			m.pending = slices.Delete(m.pending, i, i+1)
			f.run.run(0)
			return slices.Clone(m.keep(f).theta)
		}
	}
	th := fitGPTheta(cat, xs, ys)
	f := newGPFitEntry(cat, xs, ys)
	f.theta = slices.Clone(th)
	m.keep(f)
	return th
}

// newGPFitEntry is a gpFit of copies of cat, xs and ys, with no result yet.
func newGPFitEntry(cat []bool, xs [][]float64, ys []float64) gpFit {
	f := gpFit{cat: slices.Clone(cat), ys: slices.Clone(ys)}
	for _, x := range xs {
		f.xs = append(f.xs, slices.Clone(x))
	}
	return f
}

// keep remembers the fit f, whose run has ended, as the newest, and returns it.
func (m *gpMemo) keep(f gpFit) gpFit {
	if f.run != nil {
		f.theta, f.run = slices.Clone(f.run.x), nil
	}
	m.fits = append([]gpFit{f}, m.fits[:min(len(m.fits), gpMemoFits-1)]...)
	return f
}

// gpLagFrom is the largest refit size whose hyper-parameters are used from that size on;
// past it, the hyper-parameters of a refit size are used from the next refit size on
// (gpUseSize), and their fit is spread over the calls in between (gpMemo.advance).
const gpLagFrom = 64

// gpFitEvals is about how many evaluations of the marginal likelihood a fit makes
// (BFGS, gpFitIterations): advance spreads that many over the calls between two refit
// sizes.
const gpFitEvals = 160

// gpUseSize is how many of n modelled observations (the first, in ID order) the
// hyper-parameters used with them were fitted to: gpFitSize(n) up to gpLagFrom, the
// refit size before gpFitSize(n) past it. Like gpFitSize, a function of n alone.
func gpUseSize(n int) int {
	nf := gpFitSize(n)
	if nf <= gpLagFrom {
		return nf
	}
	return gpFitSize(nf - 1)
}

// gpFitData is the data the hyper-parameters at a refit size are fitted to, from the
// first observations up to that size: the modelled subset (gpSubset) of them, the
// warped scores and each constraint's values.
func gpFitData(xs [][]float64, ys []float64, cons [][]float64) ([][]float64, []float64, [][]float64) {
	keep := gpSubset(ys)
	return subset(xs, keep), gpWarp(subset(ys, keep)), gpConstraintValues(subset(cons, keep))
}

// advance works ahead on the fits of the first nf = len(ys) observations xs, ys (raw
// scores), cons (nf a refit size past gpLagFrom), the objective's and each constraint's,
// which calls will use from the next refit size on: at most gpFitEvals divided by the
// number of observations between the two refit sizes evaluations of the marginal
// likelihood per call, so that by the next refit size the fits are usually done and no
// call pays a whole fit. A call that needs a fit still under way finishes it (theta),
// and the result is the same as a fit in one go: the memo changes no suggestion.
func (m *gpMemo) advance(cat []bool, xs [][]float64, ys []float64, cons [][]float64) {
	if m == nil {
		return
	}
	nf := len(ys)
	fxs, fys, fvals := gpFitData(xs, ys, cons)
	var pending []gpFit
	for _, v := range append([][]float64{fys}, fvals...) {
		if slices.ContainsFunc(m.fits, func(f gpFit) bool { return f.same(cat, fxs, v) }) {
			continue
		}
		if i := slices.IndexFunc(m.pending, func(f gpFit) bool { return f.same(cat, fxs, v) }); i >= 0 {
			pending = append(pending, m.pending[i])
			continue
		}
		f := newGPFitEntry(cat, fxs, v)
		f.run = newGPFit(cat, fxs, v)
		pending = append(pending, f)
	}
	budget := (gpFitEvals + gpFitStep(nf) - 1) / gpFitStep(nf)
	for len(pending) > 0 && budget > 0 {
		budget -= pending[0].run.run(budget)
		if !pending[0].run.done() {
			break
		}
		m.keep(pending[0])
		pending = pending[1:]
	}
	m.pending = pending
}

func (f *gpFit) same(cat []bool, xs [][]float64, ys []float64) bool {
	if !slices.Equal(f.cat, cat) || len(f.xs) != len(xs) || !sameFloats(f.ys, ys) {
		return false
	}
	for i := range xs {
		if !sameFloats(f.xs[i], xs[i]) {
			return false
		}
	}
	return true
}
