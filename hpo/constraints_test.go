package hpo

import (
	"math"
	"slices"
	"testing"
)

// constrainedRun optimises f(x, y) = (x−0.9)² + (y−0.9)² under x + y ≤ 1: the
// unconstrained optimum (0.9, 0.9) is infeasible, the constrained one is (0.5, 0.5)
// with f = 0.32. With informed, each Completed trial carries its violation x + y − 1;
// without, the sampler is not told. It returns the best feasible value found and the
// share of feasible trials among the second half.
func constrainedRun(t *testing.T, s Sampler, seed int64, trials int, informed bool) (best, feasibleShare float64) {
	t.Helper()
	space := Space{{Name: "x", Type: Float, Min: 0, Max: 1}, {Name: "y", Type: Float, Min: 0, Max: 1}}
	h := History{Space: space, Direction: Minimize, Seed: seed}
	best = math.Inf(1)
	feasible := 0
	for id := range trials {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		v := (p["x"]-0.9)*(p["x"]-0.9) + (p["y"]-0.9)*(p["y"]-0.9)
		c := p["x"] + p["y"] - 1
		tr := Trial{ID: id, Params: p, State: TrialCompleted, Value: &v}
		if informed {
			tr.Constraints = []float64{c}
		}
		h.Trials = append(h.Trials, tr)
		if c <= 0 {
			best = math.Min(best, v)
			if id >= trials/2 {
				feasible++
			}
		}
	}
	return best, float64(feasible) / float64(trials-trials/2)
}

// Every sampler that honours constraints, told the violations, spends more of its later
// trials in the feasible region than when it is not told, finds a feasible point at
// least as good (median over seeds, within 0.01: at 60 trials NSGA-II's single-objective
// best is a tie either way, while TPE, CMA-ES and GP gain clearly), and comes within
// 0.08 of the constrained optimum.
func TestSamplersHonourConstraints(t *testing.T) {
	const seeds, trials = 7, 60
	for _, name := range []string{SamplerTPE, SamplerCMAES, SamplerGP, SamplerNSGA2} {
		t.Run(name, func(t *testing.T) {
			var withB, withoutB, withF, withoutF []float64
			for seed := int64(1); seed <= seeds; seed++ {
				s := mustSampler(t, name)
				b, f := constrainedRun(t, s, seed, trials, true)
				withB, withF = append(withB, b), append(withF, f)
				s = mustSampler(t, name)
				b, f = constrainedRun(t, s, seed, trials, false)
				withoutB, withoutF = append(withoutB, b), append(withoutF, f)
			}
			mb, mbo := median(withB), median(withoutB)
			mf, mfo := median(withF), median(withoutF)
			t.Logf("%s: best feasible median %.4f told, %.4f not told; feasible share of the later trials %.2f told, %.2f not told", name, mb, mbo, mf, mfo)
			if !(mf > mfo) {
				t.Errorf("feasible share told %.2f, not told %.2f: want more when told", mf, mfo)
			}
			if !(mb <= mbo+0.01) {
				t.Errorf("best feasible told %.4f, not told %.4f: want at least as good when told", mb, mbo)
			}
			if mb > 0.32+0.08 {
				t.Errorf("best feasible told %.4f: want within 0.08 of the constrained optimum 0.32", mb)
			}
		})
	}
}

// Best and ParetoFront leave infeasible trials out; Violation sums the positive parts
// and counts a NaN as infinite.
func TestBestIsTheBestFeasible(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	h := History{Direction: Minimize, Trials: []Trial{
		{ID: 0, Params: map[string]float64{}, State: TrialCompleted, Value: v(1), Constraints: []float64{0.5}},
		{ID: 1, Params: map[string]float64{}, State: TrialCompleted, Value: v(2), Constraints: []float64{-1, 0}},
		{ID: 2, Params: map[string]float64{}, State: TrialCompleted, Value: v(3)},
		{ID: 3, Params: map[string]float64{}, State: TrialCompleted, Value: v(0), Constraints: []float64{math.NaN()}},
	}}
	b, ok := Best(h)
	if !ok || b.ID != 1 {
		t.Fatalf("best = %d (%v), want trial 1: trial 0 and 3 are better but infeasible", b.ID, ok)
	}
	if got := Violation(&h.Trials[0]); got != 0.5 {
		t.Errorf("violation of trial 0 = %v, want 0.5", got)
	}
	if got := Violation(&h.Trials[3]); !math.IsInf(got, 1) {
		t.Errorf("violation of a NaN constraint = %v, want +Inf", got)
	}
	h.Directions = []Direction{Minimize, Minimize}
	for i := range h.Trials {
		h.Trials[i].Values = []float64{*h.Trials[i].Value, -*h.Trials[i].Value}
	}
	var ids []int
	for _, tr := range ParetoFront(h) {
		ids = append(ids, tr.ID)
	}
	if !slices.Equal(ids, []int{1, 2}) {
		t.Errorf("Pareto front %v, want the feasible trials 1 and 2", ids)
	}
	none := History{Direction: Minimize, Trials: h.Trials[:1]}
	if _, ok := Best(none); ok {
		t.Error("Best found a trial in a history whose only trial is infeasible")
	}
}
