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
	step := 1 << (bits.Len(uint(n)) - 4)
	return n / step * step
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
	mu   sync.Mutex
	fits []gpFit // newest first, at most gpMemoFits
}

const gpMemoFits = 8

// gpFit is one fit: its data and the hyper-parameters it gave.
type gpFit struct {
	cat   []bool
	xs    [][]float64
	ys    []float64
	theta []float64
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
	th := fitGPTheta(cat, xs, ys)
	f := gpFit{cat: slices.Clone(cat), ys: slices.Clone(ys), theta: slices.Clone(th)}
	for _, x := range xs {
		f.xs = append(f.xs, slices.Clone(x))
	}
	m.fits = append([]gpFit{f}, m.fits[:min(len(m.fits), gpMemoFits-1)]...)
	return th
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
