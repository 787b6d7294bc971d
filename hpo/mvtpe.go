package hpo

import (
	"maps"
	"math"
)

// mvParzen is multivariate TPE's joint density: one kernel per trial that has every
// parameter, a product of per-dimension kernels, plus a prior kernel. Numeric dimensions
// share one bandwidth, 0.2·n^(−1/(D+4)) of the domain (Scott's rule as Optuna applies it),
// clipped like the univariate ones; categorical dimensions use the smoothed-count kernel.
type mvParzen struct {
	dims []dim
	m    int       // kernels, the prior last
	logw []float64 // normalised log weights
	cum  []float64
	mu   []float64 // [j*D+d]: centre (internal coordinate, or category index)
	sig  []float64 // [j*D+d]
	logc []float64 // [j*D+d]: −log(sigma) − log(Z) (−log(Z) for an unscaled continuous dimension), or the log probability of the kernel's own category
	logo []float64 // [j*D+d]: the log probability of the other categories, or −log(Z)
	tmp  []float64 // per-kernel scratch
}

func newMVParzen(dims []dim, trials []*Trial, priorWeight float64, unscaled bool) *mvParzen {
	D := len(dims)
	obs := make([]float64, 0, len(trials)*D)
	for _, t := range trials {
		n := len(obs)
		for d := range dims {
			x, ok := dims[d].observed(t.Params)
			if !ok {
				obs = obs[:n]
				break
			}
			obs = append(obs, x)
		}
	}
	nObs := len(obs) / max(D, 1)
	m := nObs + 1
	e := &mvParzen{dims: dims, m: m,
		logw: make([]float64, m), cum: make([]float64, m),
		mu: make([]float64, m*D), sig: make([]float64, m*D),
		logc: make([]float64, m*D), logo: make([]float64, m*D)}
	w := tpeWeights(nil, nObs)
	total := priorWeight
	for _, x := range w {
		total += x
	}
	acc := 0.0
	for j := range m {
		wj := priorWeight
		if j < nObs {
			wj = w[j]
		}
		e.logw[j] = math.Log(wj / total)
		acc += wj / total
		e.cum[j] = acc
	}
	e.cum[m-1] = 1
	eps := priorWeight / float64(m)
	for d := range dims {
		dm := &dims[d]
		width := dm.hi - dm.lo
		s := 0.2 * math.Pow(float64(max(nObs, 1)), -1/float64(D+4)) * width
		s = math.Min(math.Max(s, width/math.Min(100, float64(1+m))), width)
		for j := range m {
			i := j*D + d
			prior := j == nObs
			if dm.cat {
				if prior {
					e.mu[i] = -1
					e.logc[i] = -math.Log(float64(dm.n))
					e.logo[i] = e.logc[i]
					continue
				}
				norm := 1 + float64(dm.n)*eps
				e.mu[i] = obs[j*D+d]
				e.logc[i] = math.Log((1 + eps) / norm)
				e.logo[i] = math.Log(eps / norm)
				continue
			}
			mu, sj := (dm.lo+dm.hi)/2, width
			if !prior {
				mu, sj = obs[j*D+d], s
			}
			e.mu[i], e.sig[i] = mu, sj
			logZ := truncLogZ((dm.lo-mu)/sj, (dm.hi-mu)/sj)
			e.logc[i], e.logo[i] = -math.Log(sj)-logZ, -logZ
			if unscaled && dm.q == 0 {
				e.logc[i] = -logZ
			}
		}
	}
	return e
}

// mvPoint is a candidate: per dimension its value, and what the density needs of it (the
// internal coordinate, the bin of a quantised value, the category).
type mvPoint struct {
	v, x, a, b []float64
	lw         []float64 // log(b − a), the log width of a quantised dimension's bin
}

func newMVPoint(D int) mvPoint {
	return mvPoint{v: make([]float64, D), x: make([]float64, D), a: make([]float64, D), b: make([]float64, D), lw: make([]float64, D)}
}

// sample draws a candidate from kernel j.
func (e *mvParzen) sample(r *rng, p mvPoint) {
	j := pick(e.cum, r.float64())
	D := len(e.dims)
	for d := range e.dims {
		dm := &e.dims[d]
		i := j*D + d
		if dm.cat {
			// Kernel j puts (1+ε)/norm on its category and ε/norm on each: draw its own
			// category with probability 1/norm, else uniformly.
			c := int(e.mu[i])
			if u := r.float64(); c < 0 || u >= math.Exp(e.logc[i])-math.Exp(e.logo[i]) {
				c = r.intn(dm.n)
			}
			p.v[d], p.x[d] = float64(c), float64(c)
			continue
		}
		mu, s := e.mu[i], e.sig[i]
		x := mu + s*truncStd(r.float64(), (dm.lo-mu)/s, (dm.hi-mu)/s)
		x = math.Min(math.Max(x, dm.lo), dm.hi)
		v := dm.value(x)
		p.v[d], p.x[d] = v, x
		if dm.q > 0 {
			p.a[d], p.b[d] = dm.bin(dm.index(v))
			p.lw[d] = math.Log(p.b[d] - p.a[d])
		}
	}
}

// logDensity is the log joint density (or mass, on quantised and categorical
// dimensions) at p, up to a constant shared by every mvParzen of the same dimensions.
// The quantised dimensions, whose exact mass costs two error functions, are first
// bounded from above (density at the nearest point of the bin times its width); kernels
// whose bound lies more than pruneGap below the exact term of the best-bounded kernel
// cannot matter and are skipped.
func (e *mvParzen) logDensity(p mvPoint) float64 {
	D := len(e.dims)
	e.tmp = resize(e.tmp, e.m)
	top, jt := math.Inf(-1), 0
	for j := 0; j < e.m; j++ {
		t := e.logw[j]
		for d := range e.dims {
			dm := &e.dims[d]
			i := j*D + d
			switch {
			case dm.cat:
				if e.mu[i] < 0 || e.mu[i] == p.x[d] {
					t += e.logc[i]
				} else {
					t += e.logo[i]
				}
			case dm.q > 0:
				mu, zn := e.mu[i], 0.0
				if mu < p.a[d] {
					zn = (p.a[d] - mu) / e.sig[i]
				} else if mu > p.b[d] {
					zn = (mu - p.b[d]) / e.sig[i]
				}
				// logc = −log σ − log Z and logo = −log Z, so logc − logo = −log σ.
				t += e.logo[i] + math.Min(0, p.lw[d]+e.logc[i]-e.logo[i]-halfLog2Pi-0.5*zn*zn)
			default:
				z := (p.x[d] - e.mu[i]) / e.sig[i]
				t += e.logc[i] - 0.5*z*z
			}
		}
		e.tmp[j] = t
		if t > top {
			top, jt = t, j
		}
	}
	exact := func(j int) float64 {
		t := e.tmp[j]
		for d := range e.dims {
			dm := &e.dims[d]
			if dm.cat || dm.q == 0 {
				continue
			}
			i := j*D + d
			mu, zn := e.mu[i], 0.0
			if mu < p.a[d] {
				zn = (p.a[d] - mu) / e.sig[i]
			} else if mu > p.b[d] {
				zn = (mu - p.b[d]) / e.sig[i]
			}
			bound := math.Min(0, p.lw[d]+e.logc[i]-e.logo[i]-halfLog2Pi-0.5*zn*zn)
			inv := 1 / e.sig[i]
			t += logNormMass((p.a[d]-mu)*inv, (p.b[d]-mu)*inv) - bound
		}
		return t
	}
	return prunedLogSumExp(e.tmp, jt, exact)
}

func (s *TPESampler) multivariate(dims []dim, seed int64, id int, below, above []*Trial) map[string]float64 {
	return s.multivariateGroup(dims, seed, id, 0, below, above)
}

// multivariateGroup is multivariate for one group of parameters, its random stream kept
// apart by group (0 for the whole space).
func (s *TPESampler) multivariateGroup(dims []dim, seed int64, id int, group uint64, below, above []*Trial) map[string]float64 {
	l := newMVParzen(dims, below, s.o.PriorWeight, s.o.unscaledKernels())
	g := newMVParzen(dims, above, s.o.PriorWeight, s.o.unscaledKernels())
	r := newRNG(seed, id, saltTPE^saltMultivariate^(group<<32))
	D := len(dims)
	p, best := newMVPoint(D), make([]float64, D)
	bestScore := math.Inf(-1)
	for c := 0; c < s.o.EICandidates; c++ {
		l.sample(r, p)
		if sc := l.logDensity(p) - g.logDensity(p); sc > bestScore || c == 0 {
			bestScore = sc
			copy(best, p.v)
		}
	}
	out := make(map[string]float64, D)
	for d := range dims {
		out[dims[d].p.Name] = best[d]
	}
	return out
}

const saltMultivariate uint64 = 0x4d56 // "MV"

// multivariateGroups is multivariate TPE on a conditional space, by Optuna's group
// decomposition: the parameters that share a condition (or have none) form a group,
// whose joint density is fitted to the trials in which the group was active; groups are
// sampled independently of each other.
func (s *TPESampler) multivariateGroups(dims []dim, seed int64, id int, below, above []*Trial) map[string]float64 {
	type group struct {
		first int   // a member, whose activity is the group's
		idx   []int // members, in space order
	}
	var groups []*group
	key := func(i int) (int, *Condition) { return dims[i].parent, dims[i].p.Condition }
	for i := range dims {
		var g *group
		for _, h := range groups {
			pa, ca := key(h.first)
			pb, cb := key(i)
			if pa == pb && sameCondition(ca, cb) {
				g = h
				break
			}
		}
		if g == nil {
			g = &group{first: i}
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	active := func(g *group, ts []*Trial) []*Trial {
		if dims[g.first].parent < 0 {
			return ts
		}
		var out []*Trial
		for _, t := range ts {
			if activeIn(dims, g.first, t.Params) {
				out = append(out, t)
			}
		}
		return out
	}
	out := make(map[string]float64, len(dims))
	for k, g := range groups {
		sub := make([]dim, len(g.idx))
		for j, i := range g.idx {
			sub[j] = dims[i]
		}
		maps.Copy(out, s.multivariateGroup(sub, seed, id, uint64(k), active(g, below), active(g, above)))
	}
	return out
}

// sameCondition reports whether two conditions accept the same values of the same
// parameter.
func sameCondition(a, b *Condition) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.Param != b.Param || len(a.Values) != len(b.Values) || !sameBound(a.Min, b.Min) || !sameBound(a.Max, b.Max):
		return false
	}
	for i := range a.Values {
		if a.Values[i] != b.Values[i] {
			return false
		}
	}
	return true
}

func sameBound(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
