package hpo

import (
	"cmp"
	"math"
	"slices"
)

// Small dense linear algebra for CMA-ES and the Gaussian process. It is written here
// rather than imported so that a suggestion runs no goroutine and no code whose
// results could depend on the number of CPUs: the samplers are called from workflow
// code. Matrices are row-major n×n slices.

// cholesky factors the symmetric positive-definite a (n×n) into the lower-triangular
// l with l·lᵀ = a, writing into l. It reports false when a is not positive definite.
func cholesky(a []float64, n int, l []float64) bool { return choleskyBy(a, n, l, subDot) }

// cholesky4 is cholesky with its inner products summed by dot4: the same factor up to
// rounding, for the GP's marginal likelihood where most of a fit's time goes.
func cholesky4(a []float64, n int, l []float64) bool { return choleskyBy(a, n, l, subDot4) }

// choleskyBy is the factorisation of cholesky with s − x·y computed by sub.
func choleskyBy(a []float64, n int, l []float64, sub func(s float64, x, y []float64) float64) bool {
	for i := range n {
		ri := l[i*n : i*n+i]
		for j := 0; j <= i; j++ {
			s := sub(a[i*n+j], ri[:j], l[j*n:j*n+j])
			if i == j {
				if !(s > 0) {
					return false
				}
				l[i*n+i] = math.Sqrt(s)
			} else {
				l[i*n+j] = s / l[j*n+j]
			}
		}
		for j := i + 1; j < n; j++ {
			l[i*n+j] = 0
		}
	}
	return true
}

// subDot is s − x·y, subtracting one product at a time.
func subDot(s float64, x, y []float64) float64 {
	for k := range x {
		s -= x[k] * y[k]
	}
	return s
}

// subDot4 is s − dot4(x, y).
func subDot4(s float64, x, y []float64) float64 { return s - dot4(x, y) }

// solveLower solves l·x = b in place of b (l lower triangular).
func solveLower(l []float64, n int, b []float64) {
	for i := range n {
		s := b[i]
		row := l[i*n : i*n+i]
		for k, v := range row {
			s -= v * b[k]
		}
		b[i] = s / l[i*n+i]
	}
}

// solveUpperT solves lᵀ·x = b in place of b (l lower triangular).
func solveUpperT(l []float64, n int, b []float64) {
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * b[k]
		}
		b[i] = s / l[i*n+i]
	}
}

// eigenSym returns the eigenvalues of the symmetric n×n matrix a in ascending order
// and the matching unit eigenvectors as the columns of v (cyclic Jacobi rotations).
// a is not changed.
func eigenSym(a []float64, n int) (vals, v []float64) {
	m := slices.Clone(a)
	v = make([]float64, n*n)
	for i := range n {
		v[i*n+i] = 1
	}
	for range 100 {
		off := 0.0
		for i := range n {
			for j := i + 1; j < n; j++ {
				off += m[i*n+j] * m[i*n+j]
			}
		}
		if off < 1e-30 {
			break
		}
		for p := range n {
			for q := p + 1; q < n; q++ {
				apq := m[p*n+q]
				if math.Abs(apq) < 1e-300 {
					continue
				}
				theta := (m[q*n+q] - m[p*n+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range n {
					akp, akq := m[k*n+p], m[k*n+q]
					m[k*n+p], m[k*n+q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range n {
					apk, aqk := m[p*n+k], m[q*n+k]
					m[p*n+k], m[q*n+k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range n {
					vkp, vkq := v[k*n+p], v[k*n+q]
					v[k*n+p], v[k*n+q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(m[a*n+a], m[b*n+b]) })
	vals = make([]float64, n)
	vs := make([]float64, n*n)
	for c, i := range idx {
		vals[c] = m[i*n+i]
		for k := range n {
			vs[k*n+c] = v[k*n+i]
		}
	}
	return vals, vs
}

// normCDF and normPDF are the standard normal distribution's.
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

func normPDF(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }

// finishedByID returns the trials of h in ID order, leaving out trial id and trials
// without parameters.
func finishedByID(h History, id int) []*Trial {
	out := make([]*Trial, 0, len(h.Trials))
	for i := range h.Trials {
		t := &h.Trials[i]
		if t.Params == nil || t.ID == id {
			continue
		}
		out = append(out, t)
	}
	byID := func(a, b *Trial) int { return cmp.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(out, byID) { // an experiment's history usually is
		slices.SortStableFunc(out, byID)
	}
	return out
}

// completedScore returns a trial's score to minimise when it Completed with a finite
// value.
func completedScore(d Direction, t *Trial) (float64, bool) {
	if t.State != TrialCompleted || t.Value == nil {
		return 0, false
	}
	s := score(d, *t.Value)
	return s, !math.IsNaN(s)
}

// unit maps an internal coordinate of a numeric dimension to [0, 1].
func (d *dim) unit(x float64) float64 { return (x - d.lo) / (d.hi - d.lo) }

// fromUnit maps a position in [0, 1] (clamped) to a legal value.
func (d *dim) fromUnit(u float64) float64 {
	return d.value(d.lo + min(max(u, 0), 1)*(d.hi-d.lo))
}

// dot4 is the dot product of a and b[:len(a)] summed in four interleaved partial sums,
// which lets the processor overlap the additions (about twice as fast as one running sum
// on long vectors). Its rounding differs from a single sum's but it is deterministic.
func dot4(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
