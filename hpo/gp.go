package hpo

import (
	"cmp"
	"math"
	"slices"
)

// GPSampler is Bayesian optimisation with a Gaussian process (as Optuna's GPSampler and
// Katib's bayesianoptimization): until StartupTrials trials have completed it samples
// like RandomSampler; then it fits a GP to the Completed trials and suggests the point
// that maximises expected improvement.
//
//   - Inputs are the parameters' positions in [0, 1] on their internal scale (the log on
//     a log scale); a categorical parameter contributes a distance of 0 (same choice) or
//     1 (another). Outputs are the scores (values to minimise), warped by gpWarp
//     (log(y − min + (median − min))) and standardised.
//   - The kernel is Matérn 5/2 with one length scale per parameter (ARD), a signal
//     variance and a noise variance. These are fitted by maximising the log marginal
//     likelihood plus weak log-normal priors (BFGS on their logs, analytic gradient),
//     starting from fixed values, so the fit is a pure function of the data. They are
//     fitted to the first gpFitSize(n) of the n modelled trials (refitted 8 times per
//     doubling of the history) and remembered by the data they were fitted to (gpMemo),
//     so most suggestions only condition the GP on the trials. Past 64 trials a refit
//     size's hyper-parameters are used from the next refit size on (gpUseSize), and a
//     warm sampler spreads their fit over the suggestions in between (gpMemo.advance),
//     so that no suggestion pays a whole fit; a sampler without the fit in memory (the
//     first call of a new sampler) fits at once.
//   - Expected improvement over the best observed score is maximised (in log form, which
//     stays finite far from the data) over gpCandidates random points and gpMoves small
//     moves around observed trials, then refined by a gradient ascent from the best few.
//
// Pruned, Failed and Running trials are not modelled.
type GPSampler struct {
	o    SamplerOptions
	memo *gpMemo // the last fits' hyper-parameters (gp_memo.go); nil: none kept
}

var _ Sampler = (*GPSampler)(nil)

// NewGP returns a GP sampler; it reads StartupTrials (default 10).
func NewGP(opts ...Option) (*GPSampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	return &GPSampler{o: o, memo: &gpMemo{}}, nil
}

// saltGP keeps the GP sampler's stream apart.
const saltGP uint64 = 0x4750_4250 // "GPBP"

const (
	gpCandidates    = 512 // random points screened per suggestion
	gpMoves         = 256 // moves around observations screened
	gpLocalStarts   = 3   // the best screened points refined by ascend
	gpLocalSteps    = 60  // steps of one ascent at most
	gpMinNoise      = 1e-6
	gpFitIterations = 40
	gpMaxTrials     = 200
	gpKeepBest      = 50
)

// gpModel is a fitted GP.
type gpModel struct {
	d     int
	cat   []bool
	x     [][]float64
	n     int
	ls    []float64 // length scales
	s2    float64   // signal variance
	noise float64
	l     []float64 // Cholesky factor of K
	alpha []float64 // K⁻¹y
	yMean float64
	yStd  float64
	best  float64 // best standardised observation
	kbuf  []float64
	vbuf  []float64
	cbuf  []float64
}

// Suggest fits the GP to the Completed trials and maximises expected improvement.
func (s *GPSampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	var xs [][]float64
	var ys []float64
	var cons [][]float64 // each modelled trial's constraint values
	for _, t := range finishedByID(h, id) {
		sc, ok := completedScore(h.Direction, t)
		if !ok {
			continue
		}
		x, ok := gpPoint(dims, t.Params)
		if !ok {
			continue
		}
		xs, ys, cons = append(xs, x), append(ys, sc), append(cons, t.Constraints)
	}
	if len(ys) < max(s.o.StartupTrials, 2) {
		return randomSuggest(dims, h.Seed, id), nil
	}
	// The hyper-parameters come from the first gpFitSize(n) observations (in ID order),
	// so they are refitted every few trials, not on every call; the model is then the
	// GP with those hyper-parameters on the observations of now.
	memo := s.memo
	if memo != nil && !memo.mu.TryLock() {
		memo = nil // another caller holds it: fit without
	}
	if memo != nil {
		defer memo.mu.Unlock()
	}
	cat := make([]bool, len(dims))
	for i := range dims {
		cat[i] = dims[i].cat
	}
	nu, nf := gpUseSize(len(ys)), gpFitSize(len(ys))
	fxs, fys, fvals := gpFitData(xs[:nu], ys[:nu], cons[:nu])
	theta := memo.theta(cat, fxs, fys)
	var cthetas [][]float64
	for _, v := range fvals {
		cthetas = append(cthetas, memo.theta(cat, fxs, v))
	}
	if nu < nf {
		memo.advance(cat, xs[:nf], ys[:nf], cons[:nf])
	}
	keep := gpSubset(ys)
	xs, ys, cons = subset(xs, keep), subset(ys, keep), subset(cons, keep)
	ys = gpWarp(ys)
	m := newGPModel(cat, xs, ys, theta)
	acq := m.logEI
	if c := newGPConstraints(cat, xs, ys, cons, cthetas, memo); c != nil {
		m.best = c.bestFeasible(m)
		acq = func(x, g []float64) float64 { return c.logAcquisition(m, x, g) }
	}
	r := newRNG(h.Seed, id, saltGP)
	x := m.maximise(dims, r, acq)
	out := make(map[string]float64, len(dims))
	for i := range dims {
		d := &dims[i]
		if d.cat {
			out[d.p.Name] = x[i]
		} else {
			out[d.p.Name] = d.fromUnit(x[i])
		}
	}
	return out, nil
}

// gpSubset returns the indices (ascending) of the observations to model, at most
// gpMaxTrials so that a fit stays cheap: the gpKeepBest best ones and the newest of the
// others.
func gpSubset(ys []float64) []int {
	n := len(ys)
	if n <= gpMaxTrials {
		return nil // all of them
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ys[a], ys[b]) })
	keep := make([]bool, n)
	for _, i := range idx[:gpKeepBest] {
		keep[i] = true
	}
	for i, k := n-1, gpKeepBest; i >= 0 && k < gpMaxTrials; i-- {
		if !keep[i] {
			keep[i] = true
			k++
		}
	}
	var out []int
	for i := range n {
		if keep[i] {
			out = append(out, i)
		}
	}
	return out
}

// subset returns the elements of xs at the indices keep, or xs when keep is nil.
func subset[T any](xs []T, keep []int) []T {
	if keep == nil {
		return xs
	}
	out := make([]T, len(keep))
	for i, k := range keep {
		out[i] = xs[k]
	}
	return out
}

// gpWarp returns the scores ys (to minimise) on the scale the GP models: log(y − min +
// (median − min)), with min and median those of ys. The logarithm keeps the order (so the
// best observations stay the best) but compresses the bad tail: on an objective that
// spans orders of magnitude (Rosenbrock's) a few huge values would otherwise set the
// standardised scale and flatten everything near the optimum. The offset, the spread of
// the better half, keeps that half nearly linear. A pure function of ys.
func gpWarp(ys []float64) []float64 {
	s := slices.Clone(ys)
	slices.Sort(s)
	lo, off := s[0], s[len(s)/2]-s[0]
	if !(off > 0) || !finite(off) {
		off = 1
	}
	out := make([]float64, len(ys))
	for i, y := range ys {
		v := math.Log(y - lo + off)
		if !finite(v) { // y − lo overflowed
			v = math.Log(math.MaxFloat64)
		}
		out[i] = v
	}
	return out
}

// gpPoint is a trial's input: unit positions, category indices.
func gpPoint(dims []dim, params map[string]float64) ([]float64, bool) {
	x := make([]float64, len(dims))
	for i := range dims {
		v, ok := dims[i].observed(params)
		if !ok {
			return nil, false
		}
		if dims[i].cat {
			x[i] = v
		} else {
			x[i] = dims[i].unit(v)
		}
	}
	return x, true
}

// fitGP standardises ys and fits the kernel's hyper-parameters to xs and ys.
func fitGP(dims []dim, xs [][]float64, ys []float64) *gpModel {
	cat := make([]bool, len(dims))
	for i := range dims {
		cat[i] = dims[i].cat
	}
	return newGPModel(cat, xs, ys, fitGPTheta(cat, xs, ys))
}

// gpStandardise returns ys less their mean over their standard deviation (1 when it is 0
// or not finite), with the mean and the deviation.
func gpStandardise(ys []float64) (y []float64, mean, sd float64) {
	n := len(ys)
	for _, v := range ys {
		mean += v
	}
	mean /= float64(n)
	vr := 0.0
	for _, v := range ys {
		vr += (v - mean) * (v - mean)
	}
	sd = math.Sqrt(vr / float64(n))
	if !(sd > 0) || !finite(sd) {
		sd = 1
	}
	y = make([]float64, n)
	for i, v := range ys {
		y[i] = (v - mean) / sd
	}
	return y, mean, sd
}

// fitGPTheta fits the hyper-parameters θ (log length scales, log signal variance, log
// noise variance) to xs and the standardised ys: BFGS from a fixed start, so a pure
// function of its arguments.
func fitGPTheta(cat []bool, xs [][]float64, ys []float64) []float64 {
	b := newGPFit(cat, xs, ys)
	b.run(0)
	return b.x
}

// newGPFit is fitGPTheta not yet run: BFGS from the fixed start on xs and the
// standardised ys.
func newGPFit(cat []bool, xs [][]float64, ys []float64) *bfgs {
	d := len(cat)
	y, _, _ := gpStandardise(ys)
	theta := make([]float64, d+2)
	for i := range d {
		theta[i] = math.Log(0.5)
	}
	theta[d], theta[d+1] = 0, math.Log(1e-2)
	data := newGPData(xs, cat)
	return newBFGS(func(th, g []float64) float64 { return data.negLogPost(y, th, g) }, theta, gpFitIterations)
}

// newGPModel is the GP with hyper-parameters theta conditioned on xs and the
// standardised ys.
func newGPModel(cat []bool, xs [][]float64, ys []float64, theta []float64) *gpModel {
	n, d := len(xs), len(cat)
	m := &gpModel{d: d, x: xs, n: n, cat: cat}
	y, mean, sd := gpStandardise(ys)
	m.yMean, m.yStd = mean, sd
	m.best = math.Inf(1)
	for _, v := range y {
		m.best = math.Min(m.best, v)
	}
	m.setTheta(theta)
	m.l = make([]float64, n*n)
	k := m.gram()
	for !cholesky(k, n, m.l) {
		m.noise *= 10
		k = m.gram()
	}
	m.alpha = y
	solveLower(m.l, n, m.alpha)
	solveUpperT(m.l, n, m.alpha)
	m.kbuf, m.vbuf = make([]float64, n), make([]float64, n)
	m.cbuf = make([]float64, n)
	return m
}

func (m *gpModel) setTheta(th []float64) {
	d := m.d
	m.ls = make([]float64, d)
	for i := range d {
		m.ls[i] = math.Exp(th[i])
	}
	m.s2 = math.Exp(th[d])
	m.noise = math.Exp(th[d+1]) + gpMinNoise
}

// r2 is the scaled squared distance between a and b.
func gpR2(a, b, ls []float64, cat []bool) float64 {
	s := 0.0
	for i := range a {
		var dd float64
		if cat[i] {
			if a[i] != b[i] {
				dd = 1
			}
		} else {
			dd = a[i] - b[i]
		}
		s += dd * dd / (ls[i] * ls[i])
	}
	return s
}

// matern52 is the kernel's correlation at scaled distance r.
func matern52(r float64) float64 {
	sr := math.Sqrt(5) * r
	return (1 + sr + 5*r*r/3) * math.Exp(-sr)
}

func (m *gpModel) gram() []float64 {
	n := m.n
	k := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			v := m.s2 * matern52(math.Sqrt(gpR2(m.x[i], m.x[j], m.ls, m.cat)))
			k[i*n+j], k[j*n+i] = v, v
		}
		k[i*n+i] += m.noise
	}
	return k
}

// gpData holds the per-dimension squared differences of every pair of inputs (lower
// triangle, row by row), computed once per fit, and the buffers of one evaluation.
type gpData struct {
	n, d            int
	d2              []float64 // pair p = i(i-1)/2 + j (j < i): d2[p*d+k]
	kbuf, lbuf, inv []float64
	rbuf, ebuf      []float64
}

func newGPData(xs [][]float64, cat []bool) *gpData {
	n, d := len(xs), len(cat)
	g := &gpData{n: n, d: d, d2: make([]float64, n*(n-1)/2*d)}
	p := 0
	for i := range n {
		for j := range i {
			for k := range d {
				var dd float64
				if cat[k] {
					if xs[i][k] != xs[j][k] {
						dd = 1
					}
				} else {
					dd = xs[i][k] - xs[j][k]
				}
				g.d2[p*d+k] = dd * dd
			}
			p++
		}
	}
	g.kbuf, g.lbuf, g.inv = make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	g.rbuf, g.ebuf = make([]float64, n*(n-1)/2), make([]float64, n*(n-1)/2)
	return g
}

// gpNegLogPost is minus the log marginal likelihood plus log priors at θ (log length
// scales, log signal variance, log noise variance), with its gradient in g.
func gpNegLogPost(xs [][]float64, y []float64, cat []bool, th, g []float64) float64 {
	return newGPData(xs, cat).negLogPost(y, th, g)
}

func (gd *gpData) negLogPost(y []float64, th, g []float64) float64 {
	n, d := gd.n, gd.d
	for i := range g {
		g[i] = 0
	}
	for i := range th {
		if !finite(th[i]) || math.Abs(th[i]) > 30 {
			return math.Inf(1)
		}
	}
	inv2 := make([]float64, d)
	for k := range d {
		inv2[k] = math.Exp(-2 * th[k])
	}
	s2 := math.Exp(th[d])
	noise := math.Exp(th[d+1]) + gpMinNoise
	k, l := gd.kbuf, gd.lbuf
	p := 0
	for i := range n {
		for j := range i {
			r2 := 0.0
			for q, v := range gd.d2[p*d : p*d+d] {
				r2 += v * inv2[q]
			}
			r := math.Sqrt(r2)
			sr := math.Sqrt(5) * r
			e := math.Exp(-sr)
			gd.rbuf[p], gd.ebuf[p] = r, e
			v := s2 * (1 + sr + 5*r2/3) * e
			k[i*n+j], k[j*n+i] = v, v
			p++
		}
		k[i*n+i] = s2 + noise
	}
	if !cholesky4(k, n, l) {
		return math.Inf(1)
	}
	alpha := append([]float64(nil), y...)
	solveLower(l, n, alpha)
	solveUpperT(l, n, alpha)
	nll := 0.0
	for i := range n {
		nll += 0.5*y[i]*alpha[i] + math.Log(l[i*n+i])
	}
	// K⁻¹ = L⁻ᵀ·L⁻¹: inv holds L⁻¹ transposed (row a: L⁻¹(q, a) for q ≥ a), so that
	// both loops below read rows.
	inv := gd.inv
	for i := range inv {
		inv[i] = 0
	}
	for j := range n {
		col := inv[j*n : j*n+n]
		col[j] = 1 / l[j*n+j]
		for i := j + 1; i < n; i++ {
			col[i] = -dot4(l[i*n+j:i*n+i], col[j:i]) / l[i*n+i]
		}
	}
	// K⁻¹(a, b) for a ≥ b is Σ_{q ≥ a} L⁻¹(q, a)·L⁻¹(q, b).
	kinv := func(a, b int) float64 {
		return dot4(inv[a*n+a:a*n+n], inv[b*n+a:b*n+n])
	}
	// dNLL/dθ = -½ tr((ααᵀ − K⁻¹) dK/dθ)
	p = 0
	for a := range n {
		wd := alpha[a]*alpha[a] - kinv(a, a)
		g[d+1] -= 0.5 * wd * (noise - gpMinNoise)
		g[d] -= 0.5 * wd * s2
		for b := range a {
			wgt := 2 * (alpha[a]*alpha[b] - kinv(a, b))
			r, e := gd.rbuf[p], gd.ebuf[p]
			sr := math.Sqrt(5) * r
			g[d] -= 0.5 * wgt * s2 * (1 + sr + 5*r*r/3) * e
			base := 0.5 * wgt * s2 * e * (5.0 / 3) * (1 + sr)
			for q, v := range gd.d2[p*d : p*d+d] {
				g[q] -= base * v * inv2[q]
			}
			p++
		}
	}
	// Priors: log length scale ~ N(log 0.5, 1.5²), log signal ~ N(0, 1.5²), log noise
	// ~ N(log 1e-2, 3²): weak, they only keep a fit on few points from degenerating.
	prior := func(i int, mu, sd float64) {
		z := (th[i] - mu) / sd
		nll += 0.5 * z * z
		g[i] += z / sd
	}
	for i := range d {
		prior(i, math.Log(0.5), 1.5)
	}
	prior(d, 0, 1.5)
	prior(d+1, math.Log(1e-2), 3)
	return nll
}

// bfgs minimises f (which fills its gradient) from x0 with BFGS and a backtracking line
// search, for at most iters iterations. It is a state that can stop after any
// evaluation of f and go on later (run): the evaluations and the result are the same
// however the run is split, so that a fit can be spread over several calls
// (gpMemo.advance).
type bfgs struct {
	f               func(x, g []float64) float64
	x0, x, g        []float64
	hinv            []float64
	dir, xn, gn     []float64
	fx, fn          float64
	slope, step     float64
	iters, iter, ls int
	phase           int // bfgsStart, bfgsIterate, bfgsSearch, bfgsUpdate, bfgsDone
}

const (
	bfgsStart = iota
	bfgsIterate
	bfgsSearch
	bfgsUpdate
	bfgsDone
)

// newBFGS is the minimisation of f from x0, not yet run.
func newBFGS(f func(x, g []float64) float64, x0 []float64, iters int) *bfgs {
	p := len(x0)
	return &bfgs{f: f, x0: append([]float64(nil), x0...), x: append([]float64(nil), x0...), g: make([]float64, p),
		hinv: make([]float64, p*p), dir: make([]float64, p), xn: make([]float64, p), gn: make([]float64, p), iters: iters}
}

// done reports whether the minimisation has ended; x is then its result.
func (b *bfgs) done() bool { return b.phase == bfgsDone }

// run goes on with the minimisation for at most maxEvals evaluations of f (0: until it
// ends) and returns how many it made.
func (b *bfgs) run(maxEvals int) int {
	p := len(b.x)
	used := 0
	for {
		switch b.phase {
		case bfgsStart:
			if maxEvals > 0 && used == maxEvals {
				return used
			}
			b.fx = b.f(b.x, b.g)
			used++
			if !finite(b.fx) {
				copy(b.x, b.x0)
				b.phase = bfgsDone
				continue
			}
			for i := range p {
				b.hinv[i*p+i] = 1
			}
			b.phase = bfgsIterate
		case bfgsIterate:
			if b.iter == b.iters {
				b.phase = bfgsDone
				continue
			}
			hinv, dir, g := b.hinv, b.dir, b.g
			gnorm := 0.0
			for i := range p {
				dir[i] = 0
				for j := range p {
					dir[i] -= hinv[i*p+j] * g[j]
				}
				gnorm += g[i] * g[i]
			}
			if gnorm < 1e-10 {
				b.phase = bfgsDone
				continue
			}
			slope := 0.0
			for i := range p {
				slope += dir[i] * g[i]
			}
			if slope >= 0 { // not a descent direction: reset to steepest descent
				for i := range p {
					for j := range p {
						hinv[i*p+j] = 0
					}
					hinv[i*p+i] = 1
					dir[i] = -g[i]
				}
				slope = -gnorm
			}
			b.slope, b.step, b.fn, b.ls = slope, 1, math.Inf(1), 0
			b.phase = bfgsSearch
		case bfgsSearch:
			if b.ls == 30 {
				b.phase = bfgsUpdate
				continue
			}
			if maxEvals > 0 && used == maxEvals {
				return used
			}
			for i := range p {
				b.xn[i] = b.x[i] + b.step*b.dir[i]
			}
			b.fn = b.f(b.xn, b.gn)
			used++
			b.ls++
			if finite(b.fn) && b.fn <= b.fx+1e-4*b.step*b.slope {
				b.phase = bfgsUpdate
				continue
			}
			b.step /= 2
		case bfgsUpdate:
			b.update()
		case bfgsDone:
			return used
		}
	}
}

// update takes the line search's point and updates the inverse Hessian estimate.
func (b *bfgs) update() {
	p := len(b.x)
	fx, fn := b.fx, b.fn
	if !finite(fn) || fn > fx {
		b.phase = bfgsDone
		return
	}
	s, yv := make([]float64, p), make([]float64, p)
	sy := 0.0
	for i := range p {
		s[i], yv[i] = b.xn[i]-b.x[i], b.gn[i]-b.g[i]
		sy += s[i] * yv[i]
	}
	copy(b.x, b.xn)
	copy(b.g, b.gn)
	done := fx-fn < 1e-9*math.Max(1, math.Abs(fx))
	b.fx = fn
	b.iter++
	b.phase = bfgsIterate
	if done {
		b.phase = bfgsDone
		return
	}
	if sy <= 1e-12 {
		return
	}
	// H ← (I − ρ s yᵀ) H (I − ρ y sᵀ) + ρ s sᵀ
	hinv := b.hinv
	rho := 1 / sy
	hy := make([]float64, p)
	for i := range p {
		for j := range p {
			hy[i] += hinv[i*p+j] * yv[j]
		}
	}
	yhy := 0.0
	for i := range p {
		yhy += yv[i] * hy[i]
	}
	for i := range p {
		for j := range p {
			hinv[i*p+j] += -rho*(hy[i]*s[j]+s[i]*hy[j]) + (rho*rho*yhy+rho)*s[i]*s[j]
		}
	}
}

// predict returns the posterior mean and standard deviation (standardised) at x.
func (m *gpModel) predict(x []float64) (float64, float64) {
	return m.predictGrad(x, nil, nil)
}

// predictGrad is predict that also fills dmu and dsd, when not nil, with the gradients
// of the mean and the standard deviation in x (0 in categorical dimensions).
func (m *gpModel) predictGrad(x, dmu, dsd []float64) (float64, float64) {
	k, c := m.kbuf, m.cbuf
	mu := 0.0
	for i := range m.n {
		r := math.Sqrt(gpR2(x, m.x[i], m.ls, m.cat))
		sr := math.Sqrt(5) * r
		e := math.Exp(-sr)
		k[i] = m.s2 * (1 + sr + 5*r*r/3) * e
		// ∂k/∂x_j = c·(x_j − x_ij)/ℓ_j² (Matérn 5/2)
		c[i] = -m.s2 * (5.0 / 3) * (1 + sr) * e
		mu += k[i] * m.alpha[i]
	}
	var v []float64
	if dsd != nil {
		v = m.vbuf
		copy(v, k)
	}
	solveLower(m.l, m.n, k)
	vr := m.s2
	for _, e := range k {
		vr -= e * e
	}
	sd := math.Sqrt(math.Max(vr, 1e-12))
	if dmu == nil {
		return mu, sd
	}
	for j := range dmu {
		dmu[j] = 0
	}
	if dsd != nil {
		for j := range dsd {
			dsd[j] = 0
		}
		// v = K⁻¹k: the variance's gradient is −2·vᵀ∂k/∂x.
		copy(v, k)
		solveUpperT(m.l, m.n, v)
	}
	for i := range m.n {
		xi := m.x[i]
		for j := range x {
			if m.cat[j] {
				continue
			}
			dk := c[i] * (x[j] - xi[j]) / (m.ls[j] * m.ls[j])
			dmu[j] += m.alpha[i] * dk
			if dsd != nil && vr > 1e-12 {
				dsd[j] -= v[i] * dk / sd // ∂sd = ∂var/(2·sd)
			}
		}
	}
	return mu, sd
}

// logEI is the log of the expected improvement over the best observation at x, and its
// gradient in g when g is not nil.
func (m *gpModel) logEI(x, g []float64) float64 {
	var dmu, dsd []float64
	if g != nil {
		dmu, dsd = make([]float64, len(x)), make([]float64, len(x))
	}
	mu, sd := m.predictGrad(x, dmu, dsd)
	z := (m.best - mu) / sd
	var lh, dlh float64 // log h(z) and its derivative
	if z > -6 {
		h := math.Max(z*normCDF(z)+normPDF(z), 1e-300)
		lh, dlh = math.Log(h), normCDF(z)/h
	} else {
		// h(z) ≈ φ(z)/z² for very negative z
		lh = -z*z/2 - 0.5*math.Log(2*math.Pi) - 2*math.Log(-z)
		dlh = -z - 2/z
	}
	for j := range g {
		dz := (-dmu[j] - z*dsd[j]) / sd
		g[j] = dsd[j]/sd + dlh*dz
	}
	return math.Log(sd) + lh
}

// maximise searches the candidates for the largest acq (log expected improvement, or
// its constrained form; acq fills its gradient when given a slice) and refines the
// best few by a gradient ascent (ascend).
func (m *gpModel) maximise(dims []dim, r *rng, acq func(x, g []float64) float64) []float64 {
	d := len(dims)
	type cand struct {
		x []float64
		v float64
	}
	top := make([]cand, 0, gpLocalStarts)
	consider := func(x []float64) {
		v := acq(x, nil)
		if !finite(v) {
			return
		}
		c := cand{x: x, v: v}
		i := len(top)
		for i > 0 && top[i-1].v < v {
			i--
		}
		if i >= gpLocalStarts {
			return
		}
		if len(top) < gpLocalStarts {
			top = append(top, cand{})
		}
		copy(top[i+1:], top[i:len(top)-1])
		top[i] = c
	}
	randomPoint := func() []float64 {
		x := make([]float64, d)
		for i := range dims {
			if dims[i].cat {
				x[i] = float64(r.intn(dims[i].n))
			} else {
				x[i] = r.float64()
			}
		}
		return x
	}
	for range gpCandidates {
		consider(randomPoint())
	}
	// Moves around the observations.
	for range gpMoves {
		base := m.x[r.intn(m.n)]
		x := append([]float64(nil), base...)
		for i := range dims {
			if dims[i].cat {
				if r.float64() < 1/float64(d) {
					x[i] = float64(r.intn(dims[i].n))
				}
			} else {
				x[i] = min(max(x[i]+0.05*r.norm(), 0), 1)
			}
		}
		consider(x)
	}
	if len(top) == 0 {
		return randomPoint()
	}
	best := top[0]
	for _, c := range top {
		x, v := m.ascend(dims, acq, c.x, c.v)
		if v > best.v {
			best = cand{x: x, v: v}
		}
	}
	return best.x
}

// ascend climbs acq from x0 (value v0) inside the unit cube: steps along the gradient
// scaled by each dimension's squared length scale (so that a step moves every
// dimension by about as much of its length scale), the step growing after a success
// and halving after a failure, until it is below 1e-4 of the cube or gpLocalSteps
// steps have been tried; a categorical dimension tries each of its other values
// whenever the step halves.
func (m *gpModel) ascend(dims []dim, acq func(x, g []float64) float64, x0 []float64, v0 float64) ([]float64, float64) {
	d := len(dims)
	x, v := append([]float64(nil), x0...), v0
	g, dir, xn := make([]float64, d), make([]float64, d), make([]float64, d)
	acq(x, g)
	step := 0.05
	for range gpLocalSteps {
		big := 0.0
		for j := range d {
			dir[j] = 0
			if dims[j].cat || (x[j] <= 0 && g[j] < 0) || (x[j] >= 1 && g[j] > 0) {
				continue
			}
			dir[j] = g[j] * m.ls[j] * m.ls[j]
			big = math.Max(big, math.Abs(dir[j]))
		}
		moved := false
		if big > 0 && finite(big) {
			for j := range d {
				xn[j] = min(max(x[j]+step*dir[j]/big, 0), 1)
			}
			if nv := acq(xn, nil); nv > v {
				copy(x, xn)
				v, moved = nv, true
				acq(x, g)
				step = math.Min(step*2, 0.5)
			}
		}
		if moved {
			continue
		}
		for j := range dims {
			if !dims[j].cat {
				continue
			}
			for k := range dims[j].n {
				if float64(k) == x[j] {
					continue
				}
				old := x[j]
				x[j] = float64(k)
				if nv := acq(x, nil); nv > v {
					v, moved = nv, true
				} else {
					x[j] = old
				}
			}
		}
		if moved {
			acq(x, g)
			continue
		}
		step /= 2
		if step < 1e-4 {
			break
		}
	}
	return x, v
}
