package hpo

import (
	"math"
	"slices"
	"testing"
)

// The memo changes no suggestion: a GP sampler that keeps its fits and one without a
// memo suggest the same points, over a run with 3 trials in flight (so trials finish out
// of ID order), Pruned and Failed trials, a constraint on some trials and, halfway, an
// early trial's value rewritten (a history the memo has not seen). The 120 trials take
// the refit sizes past gpLagFrom, so fits spread over calls (gpMemo.advance) are
// compared too.
func TestGPMemoChangesNoSuggestion(t *testing.T) {
	space := Space{
		{Name: "x", Type: Float, Min: 0, Max: 1},
		{Name: "lr", Type: Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "n", Type: Int, Min: 1, Max: 8},
		{Name: "c", Type: Categorical, Values: []string{"a", "b", "c"}},
	}
	warm, _ := NewGP()
	h := History{Space: space, Direction: Minimize, Seed: 3}
	const trials = 120
	for id := range trials {
		cold, _ := NewGP()
		cold.memo = nil
		pw, err := warm.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := cold.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range space {
			if math.Float64bits(pw[q.Name]) != math.Float64bits(pc[q.Name]) {
				t.Fatalf("trial %d: %s = %v with the memo, %v without", id, q.Name, pw[q.Name], pc[q.Name])
			}
		}
		v := math.Pow(pw["x"]-0.3, 2) + math.Pow(math.Log10(pw["lr"])+2, 2)/4 + pw["c"]/4
		tr := Trial{ID: id, Params: pw, State: TrialRunning, Value: &v}
		switch {
		case id%11 == 5:
			tr.State = TrialFailed
		case id%13 == 7:
			tr.State = TrialPruned
		}
		if id >= 40 {
			tr.Constraints = []float64{pw["x"] - 0.6}
		}
		h.Trials = append(h.Trials, tr)
		// Three in flight: trial id-2 finishes now, the newest last but one first.
		if id >= 2 {
			for i := range h.Trials {
				if h.Trials[i].ID == id-2 && h.Trials[i].State == TrialRunning {
					h.Trials[i].State = TrialCompleted
				}
			}
		}
		if id == trials/2 {
			for i := range h.Trials {
				if h.Trials[i].ID == 4 && h.Trials[i].State == TrialCompleted {
					w := *h.Trials[i].Value + 1
					h.Trials[i].Value = &w
				}
			}
		}
	}
	if len(warm.memo.fits) == 0 {
		t.Fatal("the memo holds no fit: it was never used")
	}
}

// TestGPFitSize: every observation below 32, then refits 8 times per doubling, never
// more observations than there are and never fewer than 7/8 of them; gpUseSize.
func TestGPFitSize(t *testing.T) {
	for n, want := range map[int]int{0: 0, 10: 10, 31: 31, 32: 32, 35: 32, 36: 36, 64: 64, 71: 64, 72: 72, 100: 96, 255: 240, 256: 256, 500: 480, 1000: 960} {
		if got := gpFitSize(n); got != want {
			t.Errorf("gpFitSize(%d) = %d, want %d", n, got, want)
		}
	}
	for n := range 5000 {
		if got := gpFitSize(n); got > n || 8*got < 7*n {
			t.Fatalf("gpFitSize(%d) = %d", n, got)
		}
	}
	// The hyper-parameters used: those of gpFitSize up to gpLagFrom, of the refit size
	// before it past gpLagFrom; never fewer than 4/5 of the observations.
	for n, want := range map[int]int{10: 10, 64: 64, 71: 64, 72: 64, 80: 72, 100: 88, 256: 240, 300: 256, 500: 448} {
		if got := gpUseSize(n); got != want {
			t.Errorf("gpUseSize(%d) = %d, want %d", n, got, want)
		}
	}
	for n := range 5000 {
		if got := gpUseSize(n); got > gpFitSize(n) || gpFitSize(got) != got || 5*got < 4*n {
			t.Fatalf("gpUseSize(%d) = %d", n, got)
		}
	}
}

// TestGPAcquisitionGradient: the gradients of log EI and of the constrained acquisition
// match finite differences (the categorical dimension's is 0).
func TestGPAcquisitionGradient(t *testing.T) {
	dims, _ := newDims(Space{
		{Name: "x", Type: Float, Min: 0, Max: 1},
		{Name: "y", Type: Float, Min: 0, Max: 1},
		{Name: "c", Type: Categorical, Values: []string{"a", "b"}},
	})
	cat := []bool{false, false, true}
	r := newRNG(1, 0, 99)
	var xs [][]float64
	var ys []float64
	var cons [][]float64
	for range 25 {
		x := []float64{r.float64(), r.float64(), float64(r.intn(2))}
		xs = append(xs, x)
		ys = append(ys, math.Sin(5*x[0])+x[1]*x[1]+0.3*x[2])
		// A noisy constraint: a noiseless one makes the feasibility model so sharp far
		// inside the infeasible region that its posterior variance is rounding noise.
		cons = append(cons, []float64{x[0] + x[1] - 1 + 0.1*r.norm()})
	}
	m := fitGP(dims, xs, ys)
	c := newGPConstraints(cat, xs, ys, cons, [][]float64{fitGPTheta(cat, xs, gpConstraintValues(cons)[0])}, nil)
	m.best = c.bestFeasible(m)
	acqs := map[string]func(x, g []float64) float64{
		"logEI":       m.logEI,
		"constrained": func(x, g []float64) float64 { return c.logAcquisition(m, x, g) },
	}
	for name, acq := range acqs {
		for range 20 {
			x := []float64{r.float64(), r.float64(), float64(r.intn(2))}
			g := make([]float64, 3)
			acq(x, g)
			if g[2] != 0 {
				t.Errorf("%s: gradient in the categorical dimension %v", name, g[2])
			}
			for j := range 2 {
				const h = 1e-6
				xp, xm := slices.Clone(x), slices.Clone(x)
				xp[j] += h
				xm[j] -= h
				fd := (acq(xp, nil) - acq(xm, nil)) / (2 * h)
				if math.Abs(fd-g[j]) > 1e-3*math.Max(1, math.Abs(fd)) {
					t.Errorf("%s at %v: gradient[%d] = %.6g, finite difference %.6g", name, x, j, g[j], fd)
				}
			}
		}
	}
}

// TestGPWarp: the warp keeps the order of the scores, maps equal scores to one value,
// and stays finite for scores near the float range's ends.
func TestGPWarp(t *testing.T) {
	ys := []float64{5, 1e6, -3, 2, 2, 40}
	w := gpWarp(ys)
	for i := range ys {
		for j := range ys {
			if (ys[i] < ys[j]) != (w[i] < w[j]) {
				t.Errorf("order of %v and %v lost: %v, %v", ys[i], ys[j], w[i], w[j])
			}
		}
	}
	if w[3] != w[4] {
		t.Errorf("equal scores warped to %v and %v", w[3], w[4])
	}
	for _, ys := range [][]float64{{7, 7, 7}, {-math.MaxFloat64, math.MaxFloat64, 0}} {
		for _, v := range gpWarp(ys) {
			if !finite(v) {
				t.Errorf("gpWarp(%v) = %v", ys, gpWarp(ys))
			}
		}
	}
}

// TestGPFitSpread: a fit spread over calls (bfgs.run with a budget, gpMemo.advance) ends
// where a fit in one go does, bit for bit, whether advance finished it or theta did.
func TestGPFitSpread(t *testing.T) {
	r := newRNG(2, 0, 7)
	cat := []bool{false, false, false, true}
	var xs [][]float64
	var ys []float64
	var cons [][]float64
	for range 80 {
		x := []float64{r.float64(), r.float64(), r.float64(), float64(r.intn(3))}
		xs = append(xs, x)
		ys = append(ys, math.Sin(4*x[0])+x[1]*x[2]+0.2*x[3])
		cons = append(cons, []float64{x[0] - 0.7})
	}
	fxs, fys, fvals := gpFitData(xs, ys, cons)
	want := fitGPTheta(cat, fxs, fys)
	b := newGPFit(cat, fxs, fys)
	evals := 0
	for !b.done() {
		evals += b.run(3)
	}
	if !sameFloats(b.x, want) {
		t.Fatalf("fit run 3 evaluations at a time: %v, in one go: %v", b.x, want)
	}
	if evals < 10 {
		t.Fatalf("the fit took %d evaluations: too few to test its spreading", evals)
	}
	// advance once (not enough to finish), then theta finishes the objective's fit; the
	// constraint's, never advanced, is fitted in one go.
	m := &gpMemo{}
	m.advance(cat, xs, ys, cons)
	if len(m.pending) != 2 {
		t.Fatalf("%d fits pending after one advance, want 2", len(m.pending))
	}
	if got := m.theta(cat, fxs, fys); !sameFloats(got, want) {
		t.Fatalf("fit finished by theta: %v, in one go: %v", got, want)
	}
	if got, want := m.theta(cat, fxs, fvals[0]), fitGPTheta(cat, fxs, fvals[0]); !sameFloats(got, want) {
		t.Fatalf("constraint fit: %v, in one go: %v", got, want)
	}
	// Advancing to the end leaves nothing pending and the fits remembered.
	m = &gpMemo{}
	for len(m.fits) < 2 {
		m.advance(cat, xs, ys, cons)
	}
	if len(m.pending) != 0 || !sameFloats(m.fits[len(m.fits)-1].theta, want) {
		t.Fatalf("advanced to the end: pending %d, objective's fit %v, want %v", len(m.pending), m.fits[len(m.fits)-1].theta, want)
	}
}
