package hpo

import (
	"cmp"
	"math"
	"slices"
)

// CMAESSampler is the covariance matrix adaptation evolution strategy (Hansen, "The
// CMA Evolution Strategy: A Tutorial", 2016) with active covariance update (negative
// weights for the worst points, as the cmaes library that Optuna's CmaEsSampler uses)
// and IPOP restarts (Auger and Hansen, CEC 2005). It searches the numeric parameters in
// the unit cube of their internal coordinates (the log on a log scale), starting from
// the centre with step size 1/6 and a first population of 4 + ⌊ln n⌋, smaller than
// Hansen's 4 + ⌊3 ln n⌋ so that a budget of a hundred trials holds about twenty
// generations (docs/hpo.md, "How CMA-ES was tuned"); ints and stepped floats are
// snapped to their grid and categorical parameters are drawn at random, as Optuna's
// independent sampler does.
//
// Suggest replays the strategy from the history; the sampler only remembers the states
// of its last replay to resume from (cmaMemo), which changes no result. The trials
// are cut, in ID order, into generations of the population size λ; a generation whose
// trials have all finished updates the distribution (Completed trials ranked by value,
// Pruned ones after them, Failed ones left out), and trial id is drawn from the
// distribution after the last whole generation before it. When the strategy has
// converged (spread below 1e-3 of the cube, flat values, or an ill-conditioned
// covariance) it restarts from a random mean with twice the population.
type CMAESSampler struct {
	o    SamplerOptions
	cfg  cmaConfig
	memo *cmaMemo // the last replay's generations (cmaes_memo.go); nil: none kept
}

// cmaConfig holds the choices of the strategy that are not user options; the defaults
// are defaultCMAConfig, and the tests compare variants.
type cmaConfig struct {
	active bool    // negative recombination weights for the covariance (active CMA)
	sigma0 float64 // first step size in the unit cube
	lnCoef float64 // default first population 4 + ⌊lnCoef·ln n⌋
	tolX   float64 // restart when σ·√(largest eigenvalue) falls below this
}

var defaultCMAConfig = cmaConfig{sigma0: cmaSigma0, lnCoef: 1, tolX: cmaTolX, active: true}

var _ Sampler = (*CMAESSampler)(nil)

// NewCMAES returns a CMA-ES sampler; PopulationSize sets its first λ.
func NewCMAES(opts ...Option) (*CMAESSampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	return &CMAESSampler{o: o, cfg: defaultCMAConfig, memo: &cmaMemo{}}, nil
}

const (
	saltCMA     uint64 = 0x434d_4145_53 // "CMAES"
	cmaSigma0          = 1.0 / 6
	cmaTolX            = 1e-3
	cmaTolFun          = 1e-12
	cmaMaxCond         = 1e14
	cmaResample        = 100
)

// cma is the state of one run of the strategy.
type cma struct {
	n, lambda, mu int
	w             []float64 // recombination weights by rank: μ positive (sum 1), then negative
	mueff         float64
	cs, ds        float64
	cc, c1, cmu   float64
	chiN          float64

	mean, ps, pc []float64
	sigma        float64
	c            []float64 // covariance, n×n
	b            []float64 // eigenvectors (columns)
	d            []float64 // square roots of the eigenvalues
	gen          int
	bestHist     []float64
	tolX         float64
}

// newCMA starts a run with population lambda at mean, with cfg's step size and
// tolerance. With cfg.active, the λ−μ worst points get negative weights (Hansen 2016, eq. 49–53: active CMA), so the
// covariance also shrinks along directions that lead to bad values; without it only the
// μ best are weighted.
func newCMA(n, lambda int, mean []float64, cfg cmaConfig) *cma {
	s := &cma{n: n, lambda: lambda, mu: lambda / 2, mean: mean, sigma: cfg.sigma0, tolX: cfg.tolX}
	wp := make([]float64, lambda)
	for i := range lambda {
		wp[i] = math.Log(float64(lambda+1)/2) - math.Log(float64(i+1))
	}
	sum, sq := 0.0, 0.0
	for _, v := range wp[:s.mu] {
		sum += v
		sq += v * v
	}
	s.mueff = sum * sum / sq
	fn := float64(n)
	s.cs = (s.mueff + 2) / (fn + s.mueff + 5)
	s.ds = 1 + 2*math.Max(0, math.Sqrt((s.mueff-1)/(fn+1))-1) + s.cs
	s.cc = (4 + s.mueff/fn) / (fn + 4 + 2*s.mueff/fn)
	s.c1 = 2 / ((fn+1.3)*(fn+1.3) + s.mueff)
	s.cmu = math.Min(1-s.c1, 2*(s.mueff-2+1/s.mueff)/((fn+2)*(fn+2)+s.mueff))
	s.chiN = math.Sqrt(fn) * (1 - 1/(4*fn) + 1/(21*fn*fn))
	s.w = make([]float64, s.mu, lambda)
	for i := range s.mu {
		s.w[i] = wp[i] / sum
	}
	if cfg.active && lambda-s.mu > 0 {
		nsum, nsq := 0.0, 0.0
		for _, v := range wp[s.mu:] {
			nsum += v
			nsq += v * v
		}
		mueffNeg := nsum * nsum / nsq
		alpha := min(1+s.c1/s.cmu, 1+2*mueffNeg/(s.mueff+2), (1-s.c1-s.cmu)/(fn*s.cmu))
		for _, v := range wp[s.mu:] {
			s.w = append(s.w, alpha*v/math.Abs(nsum))
		}
	}
	s.ps, s.pc = make([]float64, n), make([]float64, n)
	s.c, s.b = make([]float64, n*n), make([]float64, n*n)
	s.d = make([]float64, n)
	for i := range n {
		s.c[i*n+i], s.b[i*n+i], s.d[i] = 1, 1, 1
	}
	return s
}

// sample draws a point of the unit cube for trial id: resampled while outside it,
// then clipped.
func (s *cma) sample(r *rng) []float64 {
	n := s.n
	x, z, y := make([]float64, n), make([]float64, n), make([]float64, n)
	for try := 0; ; try++ {
		for i := range z {
			z[i] = s.d[i] * r.norm()
		}
		inside := true
		for i := range n {
			y[i] = 0
			for k := range n {
				y[i] += s.b[i*n+k] * z[k]
			}
			x[i] = s.mean[i] + s.sigma*y[i]
			if x[i] < 0 || x[i] > 1 {
				inside = false
			}
		}
		if inside || try == cmaResample {
			break
		}
	}
	for i := range x {
		x[i] = min(max(x[i], 0), 1)
	}
	return x
}

// weights returns the recombination weights for m ranked points (m ≤ λ when trials
// failed): the μ best keep their weights, renormalised when fewer than μ are there, and
// negative weights are used only for a whole generation.
func (s *cma) weights(m int) []float64 {
	if m == s.lambda && len(s.w) == s.lambda {
		return s.w
	}
	mu := min(s.mu, m)
	w := slices.Clone(s.w[:mu])
	ws := 0.0
	for _, v := range w {
		ws += v
	}
	for i := range w {
		w[i] /= ws
	}
	return w
}

// invSqrtC returns C^{-1/2}·y = B·D^{-1}·Bᵀ·y.
func (s *cma) invSqrtC(y []float64) []float64 {
	n := s.n
	t := make([]float64, n)
	for k := range n {
		for i := range n {
			t[k] += s.b[i*n+k] * y[i]
		}
		t[k] /= s.d[k]
	}
	out := make([]float64, n)
	for i := range n {
		for k := range n {
			out[i] += s.b[i*n+k] * t[k]
		}
	}
	return out
}

// update moves the distribution towards the best of one generation; xs are sorted
// best first. It reports whether the run should restart.
func (s *cma) update(xs [][]float64, vals []float64) bool {
	n := s.n
	s.gen++
	if len(xs) == 0 {
		return false
	}
	w := s.weights(len(xs))
	mu := min(s.mu, len(w))
	old := slices.Clone(s.mean)
	ys := make([][]float64, len(w))
	for k := range w {
		ys[k] = make([]float64, n)
		for i := range n {
			ys[k][i] = (xs[k][i] - old[i]) / s.sigma
		}
	}
	yw := make([]float64, n)
	for i := range n {
		for k := range mu {
			yw[i] += w[k] * ys[k][i]
		}
		s.mean[i] = old[i] + s.sigma*yw[i]
	}
	csn := math.Sqrt(s.cs * (2 - s.cs) * s.mueff)
	norm := 0.0
	cy := s.invSqrtC(yw)
	for i := range n {
		s.ps[i] = (1-s.cs)*s.ps[i] + csn*cy[i]
		norm += s.ps[i] * s.ps[i]
	}
	norm = math.Sqrt(norm)
	hs := 0.0
	if norm/math.Sqrt(1-math.Pow(1-s.cs, float64(2*s.gen))) < (1.4+2/float64(n+1))*s.chiN {
		hs = 1
	}
	ccn := math.Sqrt(s.cc * (2 - s.cc) * s.mueff)
	for i := range n {
		s.pc[i] = (1-s.cc)*s.pc[i] + hs*ccn*yw[i]
	}
	// Negative weights are scaled by n/‖C^{-1/2}y‖² so that they cannot make C
	// indefinite (eq. 46).
	wo := slices.Clone(w)
	wsum := 0.0
	for k := range w {
		wsum += w[k]
		if w[k] < 0 {
			cyk := s.invSqrtC(ys[k])
			nn := 0.0
			for _, v := range cyk {
				nn += v * v
			}
			wo[k] *= float64(n) / (nn + 1e-300)
		}
	}
	dh := (1 - hs) * s.cc * (2 - s.cc)
	decay := 1 + s.c1*dh - s.c1 - s.cmu*wsum
	for i := range n {
		for j := range n {
			rank := 0.0
			for k := range wo {
				rank += wo[k] * ys[k][i] * ys[k][j]
			}
			s.c[i*n+j] = decay*s.c[i*n+j] + s.c1*s.pc[i]*s.pc[j] + s.cmu*rank
		}
	}
	s.sigma *= math.Exp(math.Min(1, (s.cs/s.ds)*(norm/s.chiN-1)))
	vals2, vecs := eigenSym(s.c, n)
	s.b = vecs
	for i, v := range vals2 {
		s.d[i] = math.Sqrt(math.Max(v, 1e-300))
	}
	// Termination: converged step, flat values, or a degenerate covariance.
	s.bestHist = append(s.bestHist, vals[0])
	if s.sigma*s.d[n-1] < s.tolX || vals2[0] <= 0 || vals2[n-1]/math.Max(vals2[0], 1e-300) > cmaMaxCond {
		return true
	}
	if len(vals) > 1 && vals[len(vals)-1]-vals[0] < cmaTolFun {
		k := 10 + int(math.Ceil(30*float64(n)/float64(s.lambda)))
		if len(s.bestHist) >= k {
			recent := s.bestHist[len(s.bestHist)-k:]
			if slices.Max(recent)-slices.Min(recent) < cmaTolFun {
				return true
			}
		}
	}
	return !finite(s.sigma)
}

// Suggest replays the strategy up to trial id and draws its point.
func (s *CMAESSampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	var num []int
	for i := range dims {
		if !dims[i].cat {
			num = append(num, i)
		}
	}
	out := randomSuggest(dims, h.Seed, id)
	if len(num) == 0 {
		return out, nil
	}
	byID := indexByID(finishedByID(h, id))
	n := len(num)
	lambda0 := s.o.PopulationSize
	if lambda0 <= 0 {
		lambda0 = 4 + int(math.Floor(s.cfg.lnCoef*math.Log(float64(n))))
	}
	center := make([]float64, n)
	for i := range center {
		center[i] = 0.5
	}
	st := newCMA(n, lambda0, center, s.cfg)
	start, restarts := 0, 0
	memo := s.memo
	if memo != nil && !memo.mu.TryLock() {
		memo = nil // another caller holds it: replay without
	}
	if memo != nil {
		defer memo.mu.Unlock()
	}
	set, shared := cmaSetting{seed: h.Seed, n: n, lambda0: lambda0, cfg: s.cfg}, false
	for g := 0; id >= start+st.lambda; g++ {
		xs, vals, ok := s.generation(h.Direction, dims, num, byID, start, st.lambda)
		if !ok {
			break // a trial of this generation is unknown or running: draw from st
		}
		if memo != nil {
			if e, hit := memo.lookup(set, g, xs, vals); hit {
				st, start, restarts, shared = e.st, e.start, e.restarts, true
				continue
			}
		}
		if shared {
			st, shared = st.clone(), false // the memo's copy stays as it was
		}
		start += st.lambda
		if st.update(xs, vals) {
			restarts++
			r := newRNG(h.Seed, restarts, saltCMA)
			mean := make([]float64, n)
			for i := range mean {
				mean[i] = r.float64()
			}
			st = newCMA(n, st.lambda*2, mean, s.cfg)
		}
		if memo != nil {
			memo.store(set, g, cmaGen{xs: xs, vals: vals, start: start, restarts: restarts, st: st})
		}
	}
	x := st.sample(newRNG(h.Seed, id, saltCMA))
	for k, i := range num {
		out[dims[i].p.Name] = dims[i].fromUnit(x[k])
	}
	return out, nil
}

// generation returns the unit-cube points of trials start..start+lambda-1 and their
// scores, best first (Completed by value, then infeasible ones by violation, then
// Pruned), and false when one of them is
// missing or still running.
func (s *CMAESSampler) generation(d Direction, dims []dim, num []int, byID trialIndex, start, lambda int) ([][]float64, []float64, bool) {
	type member struct {
		x     []float64
		rank  int
		score float64
		id    int
	}
	ms := make([]member, 0, lambda)
	coords := make([]float64, lambda*len(num)) // the members' points, one allocation
	for id := start; id < start+lambda; id++ {
		t := byID.get(id)
		if t == nil || t.State == TrialRunning {
			return nil, nil, false
		}
		m := member{x: coords[:len(num):len(num)], id: id}
		coords = coords[len(num):]
		usable := true
		for k, i := range num {
			v, ok := dims[i].observed(t.Params)
			if !ok {
				usable = false
				break
			}
			m.x[k] = dims[i].unit(v)
		}
		if !usable {
			continue
		}
		if sc, ok := completedScore(d, t); ok {
			m.score = sc
			if v := Violation(t); v > 0 { // infeasible: after the feasible, by violation
				m.rank, m.score = 1, v
			}
		} else if t.State == TrialPruned {
			m.rank, m.score = 2, math.Inf(1)
			if k := len(t.Reports); k > 0 {
				if v := score(d, t.Reports[k-1].Value); !math.IsNaN(v) {
					m.score = v
				}
			}
		} else {
			continue
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.score, b.score), cmp.Compare(a.id, b.id))
	})
	xs := make([][]float64, len(ms))
	vals := make([]float64, len(ms))
	for i, m := range ms {
		xs[i], vals[i] = m.x, m.score
	}
	return xs, vals, true
}

// trialIndex finds a trial by ID. Trial IDs are usually small and dense (0, 1, 2... in
// the order the experiment numbered them), so a slice indexed by ID replaces a map; IDs
// far apart fall back to a map.
type trialIndex struct {
	dense  []*Trial
	sparse map[int]*Trial
}

// indexByID indexes ts by ID.
func indexByID(ts []*Trial) trialIndex {
	hi := -1
	for _, t := range ts {
		hi = max(hi, t.ID)
	}
	if hi >= 2*len(ts)+64 {
		m := make(map[int]*Trial, len(ts))
		for _, t := range ts {
			m[t.ID] = t
		}
		return trialIndex{sparse: m}
	}
	dense := make([]*Trial, hi+1)
	for _, t := range ts {
		if t.ID >= 0 {
			dense[t.ID] = t
		}
	}
	return trialIndex{dense: dense}
}

// get returns the trial with this ID, or nil.
func (idx trialIndex) get(id int) *Trial {
	if idx.sparse != nil {
		return idx.sparse[id]
	}
	if id < 0 || id >= len(idx.dense) {
		return nil
	}
	return idx.dense[id]
}
