package hpo

import (
	"math"
	"slices"
	"testing"
)

// Unit tests of CMA-ES, GP-BO, Hyperband, BOHB and NSGA-II. Purity and respect of the
// space are covered for every sampler by TestSamplersArePure and
// TestSamplersRespectTheSpace (allSamplers).

var sphereSpace = Space{
	{Name: "x", Type: Float, Min: -5, Max: 5},
	{Name: "y", Type: Float, Min: -5, Max: 5},
	{Name: "n", Type: Int, Min: -10, Max: 10},
}

func sphereOf(p map[string]float64) float64 {
	x, y, n := p["x"]-1, p["y"]+2, p["n"]-3
	return x*x + y*y + n*n/10
}

// TestSamplersConvergeOnASphere: on a 3-d bowl (two floats and an int), 60 trials of
// CMA-ES and of GP-BO get close to the minimum (within 0.5 and 0.2) on every one of 5 seeds, and their worst
// seed beats random search's median.
func TestSamplersConvergeOnASphere(t *testing.T) {
	pr := problem{name: "sphere", space: sphereSpace, f: func(p map[string]float64, _ *rng) float64 { return sphereOf(p) }}
	const trials = 60
	var randomBests []float64
	for seed := int64(1); seed <= 5; seed++ {
		randomBests = append(randomBests, optimise(t, mustSampler(t, SamplerRandom), pr, seed, trials))
	}
	randomMedian := median(randomBests)
	for _, c := range []struct {
		name  string
		s     Sampler
		bound float64
	}{
		{"cmaes", mustSampler(t, SamplerCMAES), 0.5},
		{"gp", mustSampler(t, SamplerGP), 0.2},
	} {
		worst := 0.0
		for seed := int64(1); seed <= 5; seed++ {
			worst = math.Max(worst, optimise(t, c.s, pr, seed, trials))
		}
		t.Logf("%s: worst best over 5 seeds %.4f (random median %.4f)", c.name, worst, randomMedian)
		if worst > c.bound || worst >= randomMedian {
			t.Errorf("%s: worst best %.4f, want <= %.2f and below random's median %.4f", c.name, worst, c.bound, randomMedian)
		}
	}
}

// TestCMAESGenerations: the first generation is drawn around the centre; a finished
// generation moves the mean towards its best members; an unfinished one leaves the
// distribution as it was, so the suggestion is the same as with that generation absent.
func TestCMAESGenerations(t *testing.T) {
	space := Space{{Name: "a", Type: Float, Min: 0, Max: 1}, {Name: "b", Type: Float, Min: 0, Max: 1}}
	s := mustSampler(t, SamplerCMAES, PopulationSize(6))
	h := History{Space: space, Direction: Minimize, Seed: 3}
	for id := range 6 {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Abs(p["a"]-0.9) + math.Abs(p["b"]-0.9)
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	mean := func(h History, from int) (float64, float64) {
		a, b := 0.0, 0.0
		for id := from; id < from+40; id++ {
			p, err := s.Suggest(h, id)
			if err != nil {
				t.Fatal(err)
			}
			a += p["a"] / 40
			b += p["b"] / 40
		}
		return a, b
	}
	// Trials 6.. of the second generation: their mean must have moved towards (0.9, 0.9).
	a0, b0 := mean(History{Space: space, Direction: Minimize, Seed: 3}, 0)
	a1, b1 := mean(h, 6)
	if !(a1 > a0 && b1 > b0) {
		t.Errorf("mean after one generation (%.3f, %.3f), before (%.3f, %.3f): want it to move towards (0.9, 0.9)", a1, b1, a0, b0)
	}
	running := slices.Clone(h.Trials)
	running[5].State, running[5].Value = TrialRunning, nil
	hr := h
	hr.Trials = running
	p1, _ := s.Suggest(hr, 7)
	p2, _ := s.Suggest(History{Space: space, Direction: Minimize, Seed: 3, Trials: h.Trials[:3]}, 7)
	if p1["a"] != p2["a"] || p1["b"] != p2["b"] {
		t.Errorf("with generation 0 unfinished, trial 7 = %v; with it half absent %v: want the same (initial distribution)", p1, p2)
	}
}

// TestCMAESRestartsWithALargerPopulation: on a flat objective the strategy converges
// (flat values), restarts and doubles its population, which shows as new means.
func TestCMAESRestarts(t *testing.T) {
	space := Space{{Name: "a", Type: Float, Min: 0, Max: 1}}
	s, _ := NewCMAES(PopulationSize(4))
	h := History{Space: space, Direction: Minimize, Seed: 9}
	for id := range 200 {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		v := 1.0 // flat: converges by tolFun after 10+30/4 generations
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	// Replay and count the generations' sizes.
	dims, _ := newDims(space)
	var trials []*Trial
	for i := range h.Trials {
		trials = append(trials, &h.Trials[i])
	}
	byID := indexByID(trials)
	st := newCMA(1, 4, []float64{0.5}, s.cfg)
	start, sizes := 0, []int{}
	for start+st.lambda <= 200 {
		xs, vals, ok := s.generation(Minimize, dims, []int{0}, byID, start, st.lambda)
		if !ok {
			break
		}
		start += st.lambda
		if st.update(xs, vals) {
			sizes = append(sizes, st.lambda)
			st = newCMA(1, st.lambda*2, []float64{0.5}, s.cfg)
		}
	}
	if len(sizes) == 0 || sizes[0] != 4 {
		t.Fatalf("restarts after populations %v: want at least one, the first of 4", sizes)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] != 2*sizes[i-1] {
			t.Errorf("populations at restarts %v: want doubling", sizes)
		}
	}
	t.Logf("restarts with populations %v", sizes)
}

// TestGPFitsAndPredicts: fitted to a smooth 1-d function, the GP interpolates it, its
// uncertainty is larger away from the data, and its marginal-likelihood gradient matches
// finite differences.
func TestGPFitsAndPredicts(t *testing.T) {
	dims, _ := newDims(Space{{Name: "x", Type: Float, Min: 0, Max: 1}, {Name: "c", Type: Categorical, Values: []string{"a", "b"}}})
	var xs [][]float64
	var ys []float64
	for i := range 12 {
		x := float64(i) / 22 // data on [0, 0.5]
		c := float64(i % 2)
		xs = append(xs, []float64{x, c})
		ys = append(ys, math.Sin(6*x)+c)
	}
	m := fitGP(dims, xs, ys)
	for i, x := range xs {
		mu, _ := m.predict(x)
		if got := mu*m.yStd + m.yMean; math.Abs(got-ys[i]) > 0.05 {
			t.Errorf("GP at %v = %.3f, want %.3f", x, got, ys[i])
		}
	}
	_, sdNear := m.predict([]float64{0.25, 0})
	_, sdFar := m.predict([]float64{0.95, 0})
	if !(sdFar > 3*sdNear) {
		t.Errorf("posterior sd at 0.95 (no data) %.4f, at 0.25 %.4f: want it much larger far from the data", sdFar, sdNear)
	}
	y := make([]float64, len(ys))
	for i := range ys {
		y[i] = (ys[i] - m.yMean) / m.yStd
	}
	th := []float64{math.Log(0.3), math.Log(0.8), 0.2, math.Log(0.05)}
	g := make([]float64, len(th))
	f0 := gpNegLogPost(xs, y, m.cat, th, g)
	for i := range th {
		const h = 1e-5
		tp := slices.Clone(th)
		tp[i] += h
		fp := gpNegLogPost(xs, y, m.cat, tp, make([]float64, len(th)))
		tp[i] -= 2 * h
		fm := gpNegLogPost(xs, y, m.cat, tp, make([]float64, len(th)))
		if fd := (fp - fm) / (2 * h); math.Abs(fd-g[i]) > 1e-4*math.Max(1, math.Abs(fd)) {
			t.Errorf("gradient[%d] = %.6f, finite difference %.6f (f = %.4f)", i, g[i], fd, f0)
		}
	}
}

func TestEigenSymAndCholesky(t *testing.T) {
	a := []float64{4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 2}
	vals, v := eigenSym(a, 3)
	for k := range 3 {
		for i := range 3 {
			av := 0.0
			for j := range 3 {
				av += a[i*3+j] * v[j*3+k]
			}
			if math.Abs(av-vals[k]*v[i*3+k]) > 1e-9 {
				t.Errorf("A·v%d != λ·v%d at row %d", k, k, i)
			}
		}
	}
	if !(vals[0] <= vals[1] && vals[1] <= vals[2]) {
		t.Errorf("eigenvalues %v not ascending", vals)
	}
	l := make([]float64, 9)
	if !cholesky(a, 3, l) {
		t.Fatal("cholesky failed on an SPD matrix")
	}
	b := []float64{1, 2, 3}
	x := slices.Clone(b)
	solveLower(l, 3, x)
	solveUpperT(l, 3, x)
	for i := range 3 {
		s := 0.0
		for j := range 3 {
			s += a[i*3+j] * x[j]
		}
		if math.Abs(s-b[i]) > 1e-12 {
			t.Errorf("A·x = %v at %d, want %v", s, i, b[i])
		}
	}
	if cholesky([]float64{1, 2, 2, 1}, 2, make([]float64, 4)) {
		t.Error("cholesky accepted an indefinite matrix")
	}
}

func TestHyperbandBrackets(t *testing.T) {
	st, err := NewStopper(StopperHyperband, ASHAMaxResource(27))
	if err != nil {
		t.Fatal(err)
	}
	hb := st.(*HyperbandStopper)
	if got := hb.Brackets(); !slices.Equal(got, []int64{1, 3, 9, 27}) {
		t.Fatalf("brackets %v, want [1 3 9 27]", got)
	}
	// Hyperband's sizes for s = 3..0: 27, 12 (ceil(4/3·9)), 6, 4 of 49.
	count := make([]int, 4)
	for id := range 4900 {
		count[hb.Bracket(5, id)]++
	}
	want := []float64{27.0 / 49, 12.0 / 49, 6.0 / 49, 4.0 / 49}
	for b, c := range count {
		if got := float64(c) / 4900; math.Abs(got-want[b]) > 0.02 {
			t.Errorf("bracket %d holds %.3f of the trials, want %.3f", b, got, want[b])
		}
	}
	if _, err := NewStopper(StopperHyperband); err == nil {
		t.Error("hyperband without a max resource: no error")
	}

	// A trial is compared only with its bracket's trials: a bad trial in bracket 0 is
	// stopped at step 1 when its bracket's others are better, whatever the others do.
	var idsIn [4][]int
	for id := 0; len(idsIn[0]) < 10 || len(idsIn[3]) < 10; id++ {
		b := hb.Bracket(5, id)
		idsIn[b] = append(idsIn[b], id)
	}
	h := History{Direction: Minimize, Seed: 5}
	for _, id := range idsIn[0][:6] {
		h.Trials = append(h.Trials, Trial{ID: id, State: TrialCompleted, Reports: []Report{{1, 0.1}, {27, 0.05}}})
	}
	bad := Trial{ID: idsIn[0][6], State: TrialRunning, Reports: []Report{{1, 0.9}}}
	if !hb.ShouldStop(h, bad) {
		t.Error("bracket 0: a trial far worse than its bracket at step 1 was not stopped")
	}
	// In the last bracket (first rung 27 = max resource) nothing is ever stopped.
	last := Trial{ID: idsIn[3][0], State: TrialRunning, Reports: []Report{{1, 0.9}, {26, 0.9}}}
	if hb.ShouldStop(h, last) {
		t.Error("the last bracket stopped a trial")
	}
	// Bracket-0 trials elsewhere do not count for a bracket-1 trial at its first rung 3:
	// alone there, it goes on.
	var id1 int
	for id := 0; ; id++ {
		if hb.Bracket(5, id) == 1 {
			id1 = id
			break
		}
	}
	b1 := Trial{ID: id1, State: TrialRunning, Reports: []Report{{1, 0.9}, {3, 0.9}}}
	if hb.ShouldStop(h, b1) {
		t.Error("a bracket-1 trial was judged against bracket-0 trials")
	}
}

// TestBOHBModelsTheLargestBudget: with too few trials anywhere BOHB draws at random;
// with enough trials reaching a rung it models that rung's values and concentrates
// near the good region there.
func TestBOHBModelsTheLargestBudget(t *testing.T) {
	space := Space{{Name: "x", Type: Float, Min: 0, Max: 1}, {Name: "y", Type: Float, Min: 0, Max: 1}}
	s := mustSampler(t, SamplerBOHB, TPEStartupTrials(5), BOHBBudgets(1, 3, 27))
	rnd := mustSampler(t, SamplerRandom)
	h := History{Space: space, Direction: Minimize, Seed: 11}
	r := newRNG(1, 0, 99)
	// 30 trials pruned at step 3: the value there is the distance to (0.2, 0.8).
	for id := range 30 {
		x, y := r.float64(), r.float64()
		v := math.Hypot(x-0.2, y-0.8)
		h.Trials = append(h.Trials, Trial{ID: id, Params: map[string]float64{"x": x, "y": y}, State: TrialPruned,
			Reports: []Report{{1, v + 0.5}, {3, v}}})
	}
	few := h
	few.Trials = h.Trials[:2]
	modelled, near := 0, 0
	for id := 30; id < 130; id++ {
		a, _ := s.Suggest(few, id)
		b, _ := rnd.Suggest(few, id)
		if a["x"] != b["x"] && newRNG(11, id, saltBOHB).float64() >= bohbRandomRate {
			// With two trials nothing is modelled, but the random draw differs from
			// RandomSampler's only if BOHB drew it: it must not.
			t.Fatalf("trial %d with 2 trials: bohb %v, random %v", id, a, b)
		}
		p, _ := s.Suggest(h, id)
		if newRNG(11, id, saltBOHB).float64() >= bohbRandomRate {
			modelled++
			if math.Hypot(p["x"]-0.2, p["y"]-0.8) < 0.3 {
				near++
			}
		}
	}
	// The disc of radius 0.3 is about 0.25 of the square; the model puts far more there.
	if frac := float64(near) / float64(modelled); frac < 0.6 {
		t.Errorf("modelled suggestions near the best region: %.2f, want >= 0.6", frac)
	}
}

func TestParetoFront(t *testing.T) {
	v := func(a, b float64) []float64 { return []float64{a, b} }
	h := History{Directions: []Direction{Minimize, Maximize}, Trials: []Trial{
		{ID: 0, State: TrialCompleted, Values: v(1, 1)},
		{ID: 1, State: TrialCompleted, Values: v(2, 3)},
		{ID: 2, State: TrialCompleted, Values: v(2, 2)},   // dominated by 1
		{ID: 3, State: TrialCompleted, Values: v(0.5, 0)}, // best on the first
		{ID: 4, State: TrialPruned, Values: v(0, 9)},      // not completed
		{ID: 5, State: TrialCompleted, Values: v(math.NaN(), 9)},
		{ID: 6, State: TrialCompleted, Values: v(1, 1)}, // equal to 0: neither dominates
	}}
	var ids []int
	for _, tr := range ParetoFront(h) {
		ids = append(ids, tr.ID)
	}
	if !slices.Equal(ids, []int{0, 1, 3, 6}) {
		t.Errorf("Pareto front %v, want [0 1 3 6]", ids)
	}
}

// hypervolume2 is the area dominated by front (minimised scores) up to ref.
func hypervolume2(pts [][2]float64, ref [2]float64) float64 {
	var in [][2]float64
	for _, p := range pts {
		if p[0] < ref[0] && p[1] < ref[1] {
			in = append(in, p)
		}
	}
	slices.SortFunc(in, func(a, b [2]float64) int {
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		if a[1] < b[1] {
			return -1
		}
		return 1
	})
	area, y := 0.0, ref[1]
	for _, p := range in {
		if p[1] < y {
			area += (ref[0] - p[0]) * (y - p[1])
			y = p[1]
		}
	}
	return area
}

// TestNSGA2BeatsRandomOnATwoObjectiveProblem: on a bi-objective problem with a known
// front (f1 = x², f2 = (x−2)² plus a penalty of the other 3 parameters), 100 trials of
// NSGA-II (population 10) dominate a larger hypervolume than random search, in median
// over 5 seeds.
func TestNSGA2BeatsRandomOnATwoObjectiveProblem(t *testing.T) {
	space := Space{
		{Name: "x", Type: Float, Min: -4, Max: 6},
		{Name: "a", Type: Float, Min: -1, Max: 1},
		{Name: "b", Type: Float, Min: -1, Max: 1},
		{Name: "k", Type: Int, Min: 0, Max: 10},
	}
	eval := func(p map[string]float64) []float64 {
		pen := p["a"]*p["a"] + p["b"]*p["b"] + p["k"]*p["k"]/25
		return []float64{p["x"]*p["x"] + pen, (p["x"]-2)*(p["x"]-2) + pen}
	}
	run := func(s Sampler, seed int64) float64 {
		h := History{Space: space, Direction: Minimize, Directions: []Direction{Minimize, Minimize}, Seed: seed}
		for id := range 100 {
			p, err := s.Suggest(h, id)
			if err != nil {
				t.Fatal(err)
			}
			vals := eval(p)
			h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &vals[0], Values: vals})
		}
		var pts [][2]float64
		for _, tr := range ParetoFront(h) {
			pts = append(pts, [2]float64{tr.Values[0], tr.Values[1]})
		}
		return hypervolume2(pts, [2]float64{10, 10})
	}
	nsga := mustSampler(t, SamplerNSGA2, PopulationSize(10))
	rnd := mustSampler(t, SamplerRandom)
	var hn, hr []float64
	for seed := int64(1); seed <= 5; seed++ {
		hn = append(hn, run(nsga, seed))
		hr = append(hr, run(rnd, seed))
	}
	t.Logf("hypervolume (ref 10, 10), median of 5 seeds: nsga2 %.3f, random %.3f", median(hn), median(hr))
	if !(median(hn) > median(hr)) {
		t.Errorf("nsga2 median hypervolume %.3f is not above random's %.3f", median(hn), median(hr))
	}
}
