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

// newGPConstraints fits one GP per constraint to the observations' constraint values,
// or returns nil when no observation carries constraints. An observation with fewer
// values than the others holds the missing ones; a value that is NaN or infinite (not
// measured) is modelled as the worst finite value seen, or 1 when there is none.
func newGPConstraints(dims []dim, xs [][]float64, ys []float64, cons [][]float64) *gpConstraints {
	k := 0
	for _, c := range cons {
		k = max(k, len(c))
	}
	if k == 0 {
		return nil
	}
	n := len(xs)
	g := &gpConstraints{feasible: make([]bool, n), ys: ys}
	for i := range n {
		t := Trial{Constraints: cons[i]}
		g.feasible[i] = Feasible(&t)
		g.any = g.any || g.feasible[i]
	}
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
		m := fitGP(dims, xs, vals)
		g.models = append(g.models, m)
		g.thresholds = append(g.thresholds, (0-m.yMean)/m.yStd)
	}
	return g
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

// logFeasibility is the log of the probability that every constraint holds at x.
func (g *gpConstraints) logFeasibility(x []float64) float64 {
	lp := 0.0
	for j, c := range g.models {
		mu, sd := c.predict(x)
		lp += math.Log(math.Max(normCDF((g.thresholds[j]-mu)/sd), 1e-300))
	}
	return lp
}

// logAcquisition is log(EI(x) · P(feasible at x)) under the objective model m; while no
// observation is feasible, the probability of feasibility alone (find a feasible point
// first).
func (g *gpConstraints) logAcquisition(m *gpModel, x []float64) float64 {
	if !g.any {
		return g.logFeasibility(x)
	}
	return m.logEI(x) + g.logFeasibility(x)
}
