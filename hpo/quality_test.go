package hpo

import (
	"math"
	"slices"
	"testing"
)

// problem is a synthetic objective to minimise, with its known optimum.
type problem struct {
	name    string
	space   Space
	optimum float64
	// f evaluates the objective; rng (seeded per trial) is there for noisy problems.
	f func(p map[string]float64, r *rng) float64
	// truth, when set, is the noise-free objective the incumbent is judged by.
	truth func(p map[string]float64) float64
}

func branin(x1, x2 float64) float64 {
	const (
		a = 1.0
		r = 6.0
		s = 10.0
	)
	b := 5.1 / (4 * math.Pi * math.Pi)
	c := 5 / math.Pi
	t := 1 / (8 * math.Pi)
	return a*math.Pow(x2-b*x1*x1+c*x1-r, 2) + s*(1-t)*math.Cos(x1) + s
}

var hartmannA = [4][6]float64{
	{10, 3, 17, 3.5, 1.7, 8},
	{0.05, 10, 17, 0.1, 8, 14},
	{3, 3.5, 1.7, 10, 17, 8},
	{17, 8, 0.05, 10, 0.1, 14},
}

var hartmannP = [4][6]float64{
	{1312, 1696, 5569, 124, 8283, 5886},
	{2329, 4135, 8307, 3736, 1004, 9991},
	{2348, 1451, 3522, 2883, 3047, 6650},
	{4047, 8828, 8732, 5743, 1091, 381},
}

var hartmannAlpha = [4]float64{1.0, 1.2, 3.0, 3.2}

func hartmann6(x [6]float64) float64 {
	sum := 0.0
	for i := range 4 {
		inner := 0.0
		for j := range 6 {
			d := x[j] - hartmannP[i][j]*1e-4
			inner += hartmannA[i][j] * d * d
		}
		sum += hartmannAlpha[i] * math.Exp(-inner)
	}
	return -sum
}

var braninSpace = Space{
	{Name: "x1", Type: Float, Min: -5, Max: 10},
	{Name: "x2", Type: Float, Min: 0, Max: 15},
}

func braninOf(p map[string]float64) float64 { return branin(p["x1"], p["x2"]) }

var hartmannNames = []string{"x1", "x2", "x3", "x4", "x5", "x6"}

func hartmannSpace() Space {
	var s Space
	for _, n := range hartmannNames {
		s = append(s, Param{Name: n, Type: Float, Min: 0, Max: 1})
	}
	return s
}

func hartmannOf(p map[string]float64) float64 {
	var x [6]float64
	for i, n := range hartmannNames {
		x[i] = p[n]
	}
	return hartmann6(x)
}

const braninNoise = 1.0

var problems = []problem{
	{name: "Branin (2-d)", space: braninSpace, optimum: 0.397887,
		f: func(p map[string]float64, _ *rng) float64 { return braninOf(p) }},
	{name: "Hartmann-6 (6-d)", space: hartmannSpace(), optimum: -3.32237,
		f: func(p map[string]float64, _ *rng) float64 { return hartmannOf(p) }},
	{name: "noisy Branin (σ=1)", space: braninSpace, optimum: 0.397887,
		f:     func(p map[string]float64, r *rng) float64 { return braninOf(p) + braninNoise*r.norm() },
		truth: braninOf},
}

// optimise runs trials sequential trials of s on pr and returns the best value found: the
// best observed value, or for a noisy problem the noise-free value of the trial with the
// best observed value (what a user would deploy).
func optimise(t testing.TB, s Sampler, pr problem, seed int64, trials int) float64 {
	h := History{Space: pr.space, Direction: Minimize, Seed: seed}
	for id := range trials {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatalf("%s seed %d trial %d: %v", pr.name, seed, id, err)
		}
		v := pr.f(p, newRNG(seed, id, 0x4e4f495345)) // "NOISE"
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	best, ok := Best(h)
	if !ok {
		t.Fatalf("%s seed %d: no best trial", pr.name, seed)
	}
	if pr.truth != nil {
		return pr.truth(best.Params)
	}
	return *best.Value
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// TestTPEBeatsRandom is the acceptance for TPE: on Branin, Hartmann-6 and a noisy
// Branin, over 20 seeds of 100 sequential trials, TPE's median best value is better than
// random search's. Multivariate TPE is held to the same bar.
func TestTPEBeatsRandom(t *testing.T) {
	const seeds, trials = 20, 100
	tpe, err := NewTPE()
	if err != nil {
		t.Fatal(err)
	}
	mv, err := NewTPE(TPEMultivariate(true))
	if err != nil {
		t.Fatal(err)
	}
	rnd, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	samplers := []struct {
		name string
		s    Sampler
	}{{"tpe", tpe}, {"tpe-multivariate", mv}, {"random", rnd}}
	t.Logf("| problem | seeds | trials | TPE median best | multivariate TPE median best | random median best | known optimum | seeds TPE beats random |")
	t.Logf("|---|---|---|---|---|---|---|---|")
	for _, pr := range problems {
		med := map[string]float64{}
		bests := map[string][]float64{}
		for _, sc := range samplers {
			for seed := int64(1); seed <= seeds; seed++ {
				bests[sc.name] = append(bests[sc.name], optimise(t, sc.s, pr, seed, trials))
			}
			med[sc.name] = median(bests[sc.name])
		}
		wins := 0
		for i, v := range bests["tpe"] {
			if v < bests["random"][i] {
				wins++
			}
		}
		t.Logf("| %s | %d | %d | %.4f | %.4f | %.4f | %.4f | %d/%d |", pr.name, seeds, trials,
			med["tpe"], med["tpe-multivariate"], med["random"], pr.optimum, wins, seeds)
		for _, name := range []string{"tpe", "tpe-multivariate"} {
			if !(med[name] < med["random"]) {
				t.Errorf("%s: %s median best %.4f is not better than random's %.4f", pr.name, name, med[name], med["random"])
			}
			if med[name] < pr.optimum-1e-3 {
				t.Errorf("%s: %s median best %.4f is below the known optimum %.4f", pr.name, name, med[name], pr.optimum)
			}
		}
	}
}
