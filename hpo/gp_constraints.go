package hpo

import "math"

// gpConstraints models each constraint of the GP sampler's observations with a GP of
// its own, so that the acquisition can weigh expected improvement by the probability
// that every constraint holds at a candidate (constraints.go).
type gpConstraints struct {
	models     []*gpModel
	thresholds []float64 // each model's standardised 0: the constraint holds at or below
	feasible   []bool    // per observation
	ys         []float64 // the observations' scores
	any        bool      // some observation is feasible
}

// newGPConstraints models each constraint of the observations (xs, their scores ys and
// constraint values cons) with a GP whose hyper-parameters, thetas[j] for constraint j,
// were fitted to the same constraint of the objective's refit data (gpMemo.thetas), or
// returns nil when no observation carries constraints. A constraint that the refit data
// lack (j ≥ len(thetas)) is fitted to the observations of now.
func newGPConstraints(cat []bool, xs [][]float64, ys []float64, cons [][]float64, thetas [][]float64, memo *gpMemo) *gpConstraints {
	vals := gpConstraintValues(cons)
	if vals == nil {
		return nil
	}
	n := len(xs)
	g := &gpConstraints{feasible: make([]bool, n), ys: ys}
	for i := range n {
		t := Trial{Constraints: cons[i]}
		g.feasible[i] = Feasible(&t)
		g.any = g.any || g.feasible[i]
	}
	for j, v := range vals {
		var theta []float64
		if j < len(thetas) {
			theta = thetas[j]
		} else { // a constraint that the refit data lacks
			theta = memo.theta(cat, xs, v)
		}
		m := newGPModel(cat, xs, v, theta)
		g.models = append(g.models, m)
		g.thresholds = append(g.thresholds, (0-m.yMean)/m.yStd)
	}
	return g
}

// gpConstraintValues returns, per constraint, every observation's value of it, or nil
// when no observation carries constraints. An observation with fewer values than the
// others holds the missing ones; a value that is NaN or infinite (not measured) is
// modelled as the worst finite value seen, or 1 when there is none.
func gpConstraintValues(cons [][]float64) [][]float64 {
	k := 0
	for _, c := range cons {
		k = max(k, len(c))
	}
	if k == 0 {
		return nil
	}
	n := len(cons)
	out := make([][]float64, k)
	for j := range k {
		vals := make([]float64, n)
		worst := math.Inf(-1)
		for i := range n {
			if j < len(cons[i]) && finite(cons[i][j]) {
				worst = math.Max(worst, cons[i][j])
			}
		}
		if !finite(worst) || worst <= 0 {
			worst = 1
		}
		for i := range n {
			switch {
			case j >= len(cons[i]):
				vals[i] = 0
			case finite(cons[i][j]):
				vals[i] = cons[i][j]
			default:
				vals[i] = worst
			}
		}
		out[j] = vals
	}
	return out
}

// bestFeasible is the best standardised score of a feasible observation under the
// objective model m (m.best when none is feasible: the acquisition then ignores it).
func (g *gpConstraints) bestFeasible(m *gpModel) float64 {
	best := math.Inf(1)
	for i, y := range g.ys {
		if g.feasible[i] {
			best = math.Min(best, (y-m.yMean)/m.yStd)
		}
	}
	if math.IsInf(best, 1) {
		return m.best
	}
	return best
}

// logFeasibility is the log of the probability that every constraint holds at x, and
// its gradient added to g when g is not nil.
func (g *gpConstraints) logFeasibility(x, grad []float64) float64 {
	var dmu, dsd []float64
	if grad != nil {
		dmu, dsd = make([]float64, len(x)), make([]float64, len(x))
	}
	lp := 0.0
	for j, c := range g.models {
		mu, sd := c.predictGrad(x, dmu, dsd)
		w := (g.thresholds[j] - mu) / sd
		l, dl := logNormCDF(w)
		lp += l
		for i := range grad {
			grad[i] += dl * (-dmu[i] - w*dsd[i]) / sd
		}
	}
	return lp
}

// logAcquisition is log(EI(x) · P(feasible at x)) under the objective model m, with its
// gradient in grad when grad is not nil; while no observation is feasible, the
// probability of feasibility alone (find a feasible point first).
func (g *gpConstraints) logAcquisition(m *gpModel, x, grad []float64) float64 {
	if !g.any {
		for i := range grad {
			grad[i] = 0
		}
		return g.logFeasibility(x, grad)
	}
	v := m.logEI(x, grad)
	return v + g.logFeasibility(x, grad)
}

// logNormCDF returns log Φ(w) and its derivative φ(w)/Φ(w), by the asymptotic series
// Φ(w) ≈ φ(w)/(−w)·(1 − w⁻² + 3w⁻⁴) below −5, where Φ underflows.
func logNormCDF(w float64) (float64, float64) {
	if w > -5 {
		p := normCDF(w)
		return math.Log(p), normPDF(w) / p
	}
	w2 := 1 / (w * w)
	s := 1 - w2 + 3*w2*w2
	l := -w*w/2 - 0.5*math.Log(2*math.Pi) - math.Log(-w) + math.Log(s)
	ds := (2*w2 - 12*w2*w2) / w // ds/dw
	return l, -w - 1/w + ds/s
}
