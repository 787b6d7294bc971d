package hpo

import (
	"cmp"
	"math"
	"slices"
)

// TPESampler is the Tree-structured Parzen Estimator (Bergstra et al., NeurIPS 2011) in
// the form Optuna uses. Until StartupTrials trials have finished (Completed or Pruned) it
// samples like RandomSampler. Then it ranks the finished trials (Completed by value, then
// Pruned by how far they got and their last value), takes the best ceil(0.1·n) (at most
// 25) as the good set and the rest as the bad set, fits a kernel density l(x) to the good
// and g(x) to the bad trials' parameters, draws EICandidates points from l and suggests
// the one with the largest l(x)/g(x), which maximises expected improvement. Failed trials
// and Running ones (unless ConstantLiar) are ignored.
type TPESampler struct {
	o SamplerOptions
}

var _ Sampler = (*TPESampler)(nil)

// NewTPE returns a TPE sampler configured by the TPE* options.
func NewTPE(opts ...Option) (*TPESampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	return &TPESampler{o: o}, nil
}

// Suggest suggests trial id's parameters. Its randomness comes from streams seeded by
// (h.Seed, id, parameter name); it reads the trials in ID order whatever their order in h.
func (s *TPESampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	below, above, n := s.split(h, id)
	if n < s.o.StartupTrials {
		return randomSuggest(dims, h.Seed, id), nil
	}
	if s.o.Multivariate {
		if conditional(dims) {
			return s.multivariateGroups(dims, h.Seed, id, below, above), nil
		}
		return s.multivariate(dims, h.Seed, id, below, above), nil
	}
	out := make(map[string]float64, len(dims))
	var ws tpeWork
	for i := range dims {
		d := &dims[i]
		if d.cat {
			out[d.p.Name] = s.categorical(&ws, dims, i, h.Seed, id, below, above)
		} else {
			out[d.p.Name] = s.numeric(&ws, dims, i, h.Seed, id, below, above)
		}
	}
	return out, nil
}

// rankedTrial is a finished trial with the keys TPE ranks it by.
type rankedTrial struct {
	t     *Trial
	step  int64   // a Pruned trial's last reported step
	score float64 // value to minimise
}

// split divides the usable trials into the good (below) and bad (above) sets, each in ID
// order, and returns the number of finished trials n. Completed trials rank by value,
// infeasible ones (constraints.go) after the feasible ones by their total violation;
// Pruned ones rank after every Completed one, the furthest-reaching first and then by
// their last reported value, as in Optuna.
func (s *TPESampler) split(h History, id int) (below, above []*Trial, n int) {
	var done, infeasible, pruned []rankedTrial
	var running []*Trial
	for i := range h.Trials {
		t := &h.Trials[i]
		if t.Params == nil || t.ID == id {
			continue
		}
		switch t.State {
		case TrialCompleted:
			if t.Value == nil {
				continue
			}
			if sc := score(h.Direction, *t.Value); !math.IsNaN(sc) {
				if v := Violation(t); v > 0 {
					infeasible = append(infeasible, rankedTrial{t: t, score: v})
				} else {
					done = append(done, rankedTrial{t: t, score: sc})
				}
			}
		case TrialPruned:
			r := rankedTrial{t: t, step: math.MinInt64, score: math.Inf(1)}
			if k := len(t.Reports); k > 0 {
				r.step = t.Reports[k-1].Step
				r.score = score(h.Direction, t.Reports[k-1].Value)
			} else if t.Value != nil {
				r.step = math.MinInt64 + 1
				r.score = score(h.Direction, *t.Value)
			}
			if math.IsNaN(r.score) {
				r.score = math.Inf(1)
			}
			pruned = append(pruned, r)
		case TrialRunning:
			if s.o.ConstantLiar {
				running = append(running, t)
			}
		}
	}
	slices.SortFunc(done, func(a, b rankedTrial) int {
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return cmp.Compare(a.t.ID, b.t.ID)
	})
	slices.SortFunc(infeasible, func(a, b rankedTrial) int { // by total violation
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.t.ID, b.t.ID))
	})
	slices.SortFunc(pruned, func(a, b rankedTrial) int {
		if c := cmp.Compare(b.step, a.step); c != 0 {
			return c
		}
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return cmp.Compare(a.t.ID, b.t.ID)
	})
	n = len(done) + len(infeasible) + len(pruned)
	nBelow := s.gamma(n)
	for i, r := range slices.Concat(done, infeasible, pruned) {
		if i < nBelow {
			below = append(below, r.t)
		} else {
			above = append(above, r.t)
		}
	}
	above = append(above, running...)
	byID := func(a, b *Trial) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(below, byID)
	slices.SortFunc(above, byID)
	return below, above, n
}

// gamma is the size of the good set among n finished trials.
func (s *TPESampler) gamma(n int) int {
	k := int(math.Ceil(s.o.GammaFraction*float64(n) - 1e-9))
	return min(k, s.o.GammaMax, n)
}

// tpeWeights fills w with the weights of n observations in trial order: equal up to 25,
// then the 25 newest weigh 1 and the older ones ramp linearly from 1/n up to 1 (Optuna's
// default), so that the density follows the search as it moves.
func tpeWeights(w []float64, n int) []float64 {
	w = resize(w, n)
	const flat = 25
	if n < flat {
		for i := range w {
			w[i] = 1
		}
		return w
	}
	ramp := n - flat
	for i := range ramp {
		if ramp == 1 {
			w[i] = 1 / float64(n)
		} else {
			w[i] = 1/float64(n) + (1-1/float64(n))*float64(i)/float64(ramp-1)
		}
	}
	for i := ramp; i < n; i++ {
		w[i] = 1
	}
	return w
}

// tpeWork holds buffers reused across the dimensions of one suggestion.
type tpeWork struct {
	xs, ws, lp, gp []float64
	cs             []int
	l, g           parzen
	cache          []scored
}

type scored struct {
	k     int
	score float64
}

// collect gathers the internal coordinates of dims[i] in the trials (in ID order) in
// which it was active (conditional.go), and their weights.
func collect(ws *tpeWork, dims []dim, i int, trials []*Trial) ([]float64, []float64) {
	d := &dims[i]
	ws.xs = ws.xs[:0]
	for _, t := range trials {
		if d.parent >= 0 && !activeIn(dims, i, t.Params) {
			continue
		}
		if x, ok := d.observed(t.Params); ok {
			ws.xs = append(ws.xs, x)
		}
	}
	ws.ws = tpeWeights(ws.ws, len(ws.xs))
	return ws.xs, ws.ws
}

func (s *TPESampler) numeric(ws *tpeWork, dims []dim, i int, seed int64, id int, below, above []*Trial) float64 {
	d := &dims[i]
	xs, w := collect(ws, dims, i, below)
	ws.l.build(xs, w, d.lo, d.hi, s.o.PriorWeight, s.o.unscaledKernels())
	xs, w = collect(ws, dims, i, above)
	ws.g.build(xs, w, d.lo, d.hi, s.o.PriorWeight, s.o.unscaledKernels())

	r := newRNG(seed, id, d.salt^saltTPE)
	bestScore, bestV := math.Inf(-1), math.NaN()
	ws.cache = ws.cache[:0]
	for c := 0; c < s.o.EICandidates; c++ {
		x := ws.l.sample(r)
		v := d.value(x)
		var sc float64
		if d.q > 0 {
			k := d.index(v)
			sc = math.NaN()
			for _, e := range ws.cache {
				if e.k == k {
					sc = e.score
					break
				}
			}
			if math.IsNaN(sc) {
				a, b := d.bin(k)
				sc = ws.l.logMass(a, b) - ws.g.logMass(a, b)
				ws.cache = append(ws.cache, scored{k, sc})
			}
		} else {
			sc = ws.l.logPDF(x) - ws.g.logPDF(x)
		}
		if sc > bestScore || math.IsNaN(bestV) {
			bestScore, bestV = sc, v
		}
	}
	return bestV
}

func collectCat(ws *tpeWork, dims []dim, i int, trials []*Trial) ([]int, []float64) {
	d := &dims[i]
	ws.cs = ws.cs[:0]
	for _, t := range trials {
		if d.parent >= 0 && !activeIn(dims, i, t.Params) {
			continue
		}
		if x, ok := d.observed(t.Params); ok {
			ws.cs = append(ws.cs, int(x))
		}
	}
	ws.ws = tpeWeights(ws.ws, len(ws.cs))
	return ws.cs, ws.ws
}

func (s *TPESampler) categorical(ws *tpeWork, dims []dim, i int, seed int64, id int, below, above []*Trial) float64 {
	d := &dims[i]
	cs, w := collectCat(ws, dims, i, below)
	ws.lp = catLogProbs(ws.lp, d.n, cs, w, s.o.PriorWeight)
	cs, w = collectCat(ws, dims, i, above)
	ws.gp = catLogProbs(ws.gp, d.n, cs, w, s.o.PriorWeight)

	ws.xs = resize(ws.xs, d.n) // cumulative probabilities of l
	acc := 0.0
	for k, lp := range ws.lp {
		acc += math.Exp(lp)
		ws.xs[k] = acc
	}
	r := newRNG(seed, id, d.salt^saltTPE)
	best, bestScore := -1, math.Inf(-1)
	for c := 0; c < s.o.EICandidates; c++ {
		k := pick(ws.xs, r.float64()*acc)
		if sc := ws.lp[k] - ws.gp[k]; sc > bestScore || best < 0 {
			best, bestScore = k, sc
		}
	}
	return float64(best)
}

// randomSuggest is RandomSampler's draw, used by TPE during its startup trials so that
// both start from the same configurations for a given seed.
func randomSuggest(dims []dim, seed int64, id int) map[string]float64 {
	out := make(map[string]float64, len(dims))
	for i := range dims {
		d := &dims[i]
		out[d.p.Name] = d.uniform(newRNG(seed, id, d.salt^saltRandom))
	}
	return out
}
