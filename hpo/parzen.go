package hpo

import (
	"cmp"
	"math"
	"slices"
)

// This file holds the kernel densities TPE builds: a mixture of normal kernels truncated
// to a numeric dimension's internal domain, with one kernel per observed trial plus one
// wide prior kernel, and smoothed category counts for a categorical dimension.

const halfLog2Pi = 0.9189385332046727 // log(2π)/2

// ncdf is the standard normal CDF, accurate in the lower tail.
func ncdf(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// logNormMass returns log(Φ(b) − Φ(a)) for a < b, keeping precision in both tails.
func logNormMass(a, b float64) float64 {
	if a+b > 0 { // mirror so the interval leans to the left, where Φ is small and exact
		a, b = -b, -a
	}
	if d := ncdf(b) - ncdf(a); d > 1e-300 {
		return math.Log(d)
	}
	// Both ends deep in the lower tail: Φ(b) − Φ(a) ≈ φ(b)·min(b−a, 1/|b|).
	return -0.5*b*b - halfLog2Pi + math.Log(min(b-a, 1/math.Abs(b)))
}

// truncLogZ is logNormMass for a kernel's truncation interval, 0 when the interval
// holds all but a negligible (< 1e-15) share of the kernel's mass, as it does for most
// of the narrow kernels of a large history.
func truncLogZ(a, b float64) float64 {
	if a < -8.3 && b > 8.3 {
		return 0
	}
	return logNormMass(a, b)
}

// truncStd maps u in [0,1) to a standard normal truncated to [a, b] by inverting the
// CDF, on the side of the mirror where Φ is exact.
func truncStd(u, a, b float64) float64 {
	flip := a+b > 0
	if flip {
		a, b = -b, -a
	}
	pa, pb := ncdf(a), ncdf(b)
	p := pa + u*(pb-pa)
	z := -math.Sqrt2 * math.Erfcinv(2*p)
	if !(z >= a) { // also catches NaN
		z = a
	}
	if z > b {
		z = b
	}
	if flip {
		z = -z
	}
	return z
}

// kern is one observation for a density: its internal coordinate and weight.
type kern struct {
	mu, w float64
	prior bool
	idx   int
}

// parzen is a mixture of truncated normals on [lo, hi].
type parzen struct {
	lo, hi float64
	mu     []float64
	sigma  []float64
	inv    []float64 // 1/sigma
	loginv []float64 // log(1/sigma)
	tmp    []float64 // per-kernel scratch
	logc   []float64 // log(weight) − log(sigma) − log(Z), Z the kernel's mass on [lo, hi]
	logwz  []float64 // log(weight) − log(Z)
	cum    []float64 // cumulative normalised weights, for sampling a kernel
	ks     []kern
}

// build sets the mixture from observations xs (internal coordinates) with weights ws,
// plus a prior kernel centred on the domain with the domain's width as bandwidth and
// weight priorWeight. Bandwidths follow Optuna's univariate heuristic: each kernel's
// sigma is the larger distance to its neighbours among the sorted centres (the domain
// ends act as neighbours, except that the outermost kernels use their inner neighbour
// only), clipped to [(hi−lo)/min(100, 1+m), hi−lo] where m counts the kernels.
//
// With unscaled set, logPDF counts each kernel by its shape alone, exp(−z²/2)/Z without
// the 1/sigma of a density (what Optuna 3.1's truncnorm.logpdf computes, see
// TPEScoresUnscaled): a wide kernel then weighs as much at its centre as a narrow one.
// Sampling and logMass are the same either way.
func (e *parzen) build(xs, ws []float64, lo, hi, priorWeight float64, unscaled bool) {
	e.lo, e.hi = lo, hi
	m := len(xs) + 1
	e.ks = e.ks[:0]
	for i, x := range xs {
		e.ks = append(e.ks, kern{mu: x, w: ws[i], idx: i})
	}
	e.ks = append(e.ks, kern{mu: (lo + hi) / 2, w: priorWeight, prior: true, idx: len(xs)})
	width := hi - lo
	e.mu = resize(e.mu, m)
	e.sigma = resize(e.sigma, m)
	e.inv = resize(e.inv, m)
	e.loginv = resize(e.loginv, m)
	e.logc = resize(e.logc, m)
	e.logwz = resize(e.logwz, m)
	e.cum = resize(e.cum, m)
	slices.SortFunc(e.ks, func(a, b kern) int {
		if c := cmp.Compare(a.mu, b.mu); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	minSigma := width / math.Min(100, float64(1+m))
	total := 0.0
	for _, k := range e.ks {
		total += k.w
	}
	logTotal := -math.Log(total)
	acc := 0.0
	for j, k := range e.ks {
		var s float64
		switch {
		case k.prior:
			s = width
		default:
			left, right := k.mu-lo, hi-k.mu
			if j > 0 {
				left = k.mu - e.ks[j-1].mu
			}
			if j < m-1 {
				right = e.ks[j+1].mu - k.mu
			}
			switch {
			case m >= 2 && j == 0:
				s = right
			case m >= 2 && j == m-1:
				s = left
			default:
				s = math.Max(left, right)
			}
		}
		if !k.prior {
			s = math.Min(math.Max(s, minSigma), width)
		}
		e.mu[j], e.sigma[j], e.inv[j], e.loginv[j] = k.mu, s, 1/s, -math.Log(s)
		logZ := truncLogZ((lo-k.mu)/s, (hi-k.mu)/s)
		lw := logTotal
		if k.w != 1 {
			lw = math.Log(k.w) + logTotal
		}
		e.logwz[j] = lw - logZ
		e.logc[j] = lw + e.loginv[j] - logZ
		if unscaled {
			e.logc[j] = lw - logZ
		}
		acc += k.w / total
		e.cum[j] = acc
	}
	e.cum[m-1] = 1
}

func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// pick returns the index of a kernel drawn with probability its weight.
func pick(cum []float64, u float64) int {
	j, _ := slices.BinarySearch(cum, u)
	if j >= len(cum) {
		j = len(cum) - 1
	}
	// BinarySearch finds the first cum >= u; a kernel whose cum equals u has zero width
	// on the right, so step past equal ones.
	for j < len(cum)-1 && cum[j] <= u {
		j++
	}
	return j
}

// sample draws a point from the mixture.
func (e *parzen) sample(r *rng) float64 {
	j := pick(e.cum, r.float64())
	return e.sampleKernel(r, j)
}

func (e *parzen) sampleKernel(r *rng, j int) float64 {
	mu, s := e.mu[j], e.sigma[j]
	x := mu + s*truncStd(r.float64(), (e.lo-mu)*e.inv[j], (e.hi-mu)*e.inv[j])
	return math.Min(math.Max(x, e.lo), e.hi)
}

// pruneGap is how far (in nats) below the largest kernel term a term may be left out of
// a mixture's log-sum: the relative error is at most (kernels)·e^−pruneGap ≈ 1e-13.
const pruneGap = 38

// logPDF is the log density at x, up to the constant −log(2π)/2 shared by every mixture.
// Kernels whose term is more than pruneGap below the largest are skipped, which saves
// most of the exponentials once there are hundreds of narrow kernels.
func (e *parzen) logPDF(x float64) float64 {
	e.tmp = resize(e.tmp, len(e.mu))
	m := math.Inf(-1)
	for j, mu := range e.mu {
		z := (x - mu) * e.inv[j]
		t := e.logc[j] - 0.5*z*z
		e.tmp[j] = t
		if t > m {
			m = t
		}
	}
	s := 0.0
	for _, t := range e.tmp {
		if t > m-pruneGap {
			s += math.Exp(t - m)
		}
	}
	return m + math.Log(s) + halfLog2Pi
}

// logMass is the log probability of the interval [a, b]. A cheap upper bound of each
// kernel's term (its density at the point of [a, b] nearest its centre times the width)
// decides which kernels cannot matter; the others are computed exactly.
func (e *parzen) logMass(a, b float64) float64 {
	e.tmp = resize(e.tmp, len(e.mu))
	lw := math.Log(b-a) - halfLog2Pi
	top, jt := math.Inf(-1), 0
	for j, mu := range e.mu {
		zn := 0.0
		if mu < a {
			zn = (a - mu) * e.inv[j]
		} else if mu > b {
			zn = (mu - b) * e.inv[j]
		}
		u := e.logwz[j] + math.Min(0, lw+e.loginv[j]-0.5*zn*zn)
		e.tmp[j] = u
		if u > top {
			top, jt = u, j
		}
	}
	exact := func(j int) float64 {
		return e.logwz[j] + logNormMass((a-e.mu[j])*e.inv[j], (b-e.mu[j])*e.inv[j])
	}
	return prunedLogSumExp(e.tmp, jt, exact)
}

// prunedLogSumExp returns the log of the sum of exp(exact(j)) over the kernels j whose
// upper bound bounds[j] is no more than pruneGap below exact(top), the exact term of
// the kernel with the highest bound; the others cannot change the sum by more than
// pruneGap allows. It is a streaming log-sum-exp over the terms it keeps.
func prunedLogSumExp(bounds []float64, top int, exact func(int) float64) float64 {
	floor := exact(top) - pruneGap
	m, s := math.Inf(-1), 0.0
	for j, u := range bounds {
		if u < floor {
			continue
		}
		t := exact(j)
		if t > m {
			s = s*math.Exp(m-t) + 1
			m = t
		} else {
			s += math.Exp(t - m)
		}
	}
	return m + math.Log(s)
}

// catLogProbs returns the log probabilities of n categories under TPE's categorical
// density: each observation is a kernel that puts 1+ε on its category and ε on every
// category (ε = priorWeight / (observations+1)), normalised; the prior kernel is uniform;
// kernels are mixed by weight.
func catLogProbs(dst []float64, n int, cs []int, ws []float64, priorWeight float64) []float64 {
	dst = resize(dst, n)
	total := priorWeight
	for _, w := range ws {
		total += w
	}
	eps := priorWeight / float64(len(cs)+1)
	norm := 1 + float64(n)*eps
	base := priorWeight / total / float64(n)
	for _, w := range ws {
		base += w / total * eps / norm
	}
	for c := range dst {
		dst[c] = base
	}
	for i, c := range cs {
		dst[c] += ws[i] / total / norm
	}
	for c := range dst {
		dst[c] = math.Log(dst[c])
	}
	return dst
}
