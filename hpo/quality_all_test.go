package hpo

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// The side-by-side quality protocol of every sampler: the problems of quality_test.go
// plus Rosenbrock-10 and a mixed float/log/int/categorical problem, 100 sequential
// trials per run, seeds 1..-hpo.seeds (default 5; the figures in docs/hpo.md use 20),
// median and quartiles of the best value found. The multi-fidelity algorithms are
// measured at equal budget on the same problems given learning curves (see
// optimiseBudget).

var qualitySeeds = flag.Int("hpo.seeds", 5, "seeds of the side-by-side quality protocol (docs/hpo.md uses 20)")

func rosenbrockSpace(n int) Space {
	var s Space
	for i := range n {
		s = append(s, Param{Name: fmt.Sprintf("x%02d", i), Type: Float, Min: -5, Max: 10})
	}
	return s
}

func rosenbrockOf(p map[string]float64) float64 {
	sum := 0.0
	for i := range 9 {
		x, y := p[fmt.Sprintf("x%02d", i)], p[fmt.Sprintf("x%02d", i+1)]
		sum += 100*(y-x*x)*(y-x*x) + (1-x)*(1-x)
	}
	return sum
}

// trainingSpace is a training-like space: a log-scaled learning rate, an int depth, a
// log-scaled int width, a categorical optimiser and a stepped dropout.
var trainingSpace = Space{
	{Name: "lr", Type: Float, Min: 1e-5, Max: 1, Log: true},
	{Name: "layers", Type: Int, Min: 1, Max: 8},
	{Name: "units", Type: Int, Min: 16, Max: 1024, Log: true},
	{Name: "optimizer", Type: Categorical, Values: []string{"sgd", "adam", "rmsprop", "adagrad"}},
	{Name: "dropout", Type: Float, Min: 0, Max: 0.5, Step: 0.05},
}

// mixedOf is 0 at lr = 10^-2.5, 3 layers, 256 units, adam and dropout 0.2.
func mixedOf(p map[string]float64) float64 {
	lr := math.Log10(p["lr"]) + 2.5
	layers := p["layers"] - 3
	units := math.Log2(p["units"]) - 8
	opt := []float64{0.6, 0, 0.3, 1}[int(p["optimizer"])]
	drop := p["dropout"] - 0.2
	return lr*lr/4 + layers*layers/9 + units*units/16 + opt + 4*drop*drop
}

func allProblems() []problem {
	return append(slices.Clone(problems),
		problem{name: "Rosenbrock (10-d)", space: rosenbrockSpace(10), optimum: 0,
			f: func(p map[string]float64, _ *rng) float64 { return rosenbrockOf(p) }},
		problem{name: "mixed (5-d: log float, int, log int, categorical, stepped float)", space: trainingSpace, optimum: 0,
			f: func(p map[string]float64, _ *rng) float64 { return mixedOf(p) }},
	)
}

type qualitySampler struct {
	name string
	s    Sampler
}

func mustSampler(t testing.TB, name string, opts ...Option) Sampler {
	s, err := New(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// quartiles returns the lower quartile, the median and the upper quartile.
func quartiles(xs []float64) (q1, q2, q3 float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 {
		pos := p * float64(len(s)-1)
		i := int(math.Floor(pos))
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (pos-float64(i))*(s[i+1]-s[i])
	}
	return at(0.25), at(0.5), at(0.75)
}

func fmtQ(xs []float64) string {
	q1, q2, q3 := quartiles(xs)
	return fmt.Sprintf("%s [%s, %s]", fmtV(q2), fmtV(q1), fmtV(q3))
}

func fmtV(v float64) string {
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// TestSamplersSideBySide runs every sampler on every problem and prints the table of
// docs/hpo.md. It asserts that every model-based sampler beats random search's median
// on Branin and Hartmann-6, and reports (without failing) whether GP and CMA-ES beat TPE
// on Hartmann-6.
func TestSamplersSideBySide(t *testing.T) {
	seeds := *qualitySeeds
	const trials = 100
	samplers := []qualitySampler{
		{"random", mustSampler(t, SamplerRandom)},
		{"tpe", mustSampler(t, SamplerTPE)},
		{"cmaes", mustSampler(t, SamplerCMAES)},
		{"gp", mustSampler(t, SamplerGP)},
		{"bohb", mustSampler(t, SamplerBOHB)},
		{"nsga2", mustSampler(t, SamplerNSGA2)},
	}
	var head []string
	for _, s := range samplers {
		head = append(head, s.name)
	}
	t.Logf("| problem | %s | known optimum |", strings.Join(head, " | "))
	t.Logf("|---|%s---|", strings.Repeat("---|", len(samplers)))
	for _, pr := range allProblems() {
		row := []string{pr.name}
		meds := map[string]float64{}
		for _, sc := range samplers {
			var bests []float64
			for seed := int64(1); seed <= int64(seeds); seed++ {
				bests = append(bests, optimise(t, sc.s, pr, seed, trials))
			}
			_, meds[sc.name], _ = quartiles(bests)
			row = append(row, fmtQ(bests))
		}
		t.Logf("| %s | %s |", strings.Join(row, " | "), fmtV(pr.optimum))
		if strings.HasPrefix(pr.name, "Branin") || strings.HasPrefix(pr.name, "Hartmann") {
			for _, name := range []string{"tpe", "cmaes", "gp", "bohb"} {
				if !(meds[name] < meds["random"]) {
					t.Errorf("%s: %s median %.4f does not beat random's %.4f", pr.name, name, meds[name], meds["random"])
				}
			}
		}
		if strings.HasPrefix(pr.name, "Hartmann") {
			for _, name := range []string{"gp", "cmaes"} {
				t.Logf("Hartmann-6: %s median %.4f vs tpe %.4f: beats TPE: %v", name, meds[name], meds["tpe"], meds[name] < meds["tpe"])
			}
		}
	}
}
