package hpo

import (
	"math"
	"slices"
	"sync"
)

// cmaMemo keeps the strategy's state after each generation of the last history a
// CMAESSampler replayed, so that the next call, whose history is usually the same
// generations plus a few trials, resumes from the last whole generation instead of
// repeating every update (an eigendecomposition each). It changes no result: a stored
// state is reused only when the setting and every generation up to it (the ranked
// points and their scores) are bit for bit the ones that produced it; otherwise the
// replay goes on from the last state that matches.
//
// A sampler serves one experiment, whose workflow calls Suggest from one coroutine;
// the memo is guarded by a mutex that is only ever tried, never waited on, so a second
// concurrent caller replays from scratch instead of blocking.
type cmaMemo struct {
	mu      sync.Mutex
	setting cmaSetting
	gens    []cmaGen
}

// cmaSetting is what a replay starts from: the seed (restarts draw their mean from it),
// the number of numeric parameters, the first population and the configuration.
type cmaSetting struct {
	seed       int64
	n, lambda0 int
	cfg        cmaConfig
}

// cmaGen is one generation as the replay saw it and the state after it.
type cmaGen struct {
	xs              [][]float64 // the generation's points, best first
	vals            []float64   // their scores
	start, restarts int         // the next generation's first trial id, restarts so far
	st              *cma        // the state; never changed once stored (clone before update)
}

// lookup returns the state stored for generation g if the memo's setting is set and
// generation g had exactly these points and scores. Generations are looked up in
// order and a miss truncates the memo (store), so a hit at g means every earlier
// generation matched too.
func (m *cmaMemo) lookup(set cmaSetting, g int, xs [][]float64, vals []float64) (cmaGen, bool) {
	if m.setting != set || g >= len(m.gens) {
		return cmaGen{}, false
	}
	e := m.gens[g]
	if !sameFloats(e.vals, vals) || len(e.xs) != len(xs) {
		return cmaGen{}, false
	}
	for i := range xs {
		if !sameFloats(e.xs[i], xs[i]) {
			return cmaGen{}, false
		}
	}
	return e, true
}

// store records generation g and the state after it (a copy of e.st), dropping what
// the memo held for generation g and later: they belonged to another history.
func (m *cmaMemo) store(set cmaSetting, g int, e cmaGen) {
	if m.setting != set {
		m.setting, m.gens = set, nil
	}
	e.st = e.st.clone()
	m.gens = append(m.gens[:min(g, len(m.gens))], e)
}

// sameFloats reports whether a and b hold the same bits.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// clone returns a deep copy of the state.
func (s *cma) clone() *cma {
	c := *s
	c.w = slices.Clone(s.w)
	c.mean, c.ps, c.pc = slices.Clone(s.mean), slices.Clone(s.ps), slices.Clone(s.pc)
	c.c, c.b, c.d = slices.Clone(s.c), slices.Clone(s.b), slices.Clone(s.d)
	c.bestHist = slices.Clone(s.bestHist)
	return &c
}
