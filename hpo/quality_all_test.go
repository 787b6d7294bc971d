package hpo

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// The side-by-side quality protocol of every sampler: the problems of quality_test.go
// plus Rosenbrock-10 and a mixed float/log/int/categorical problem, 100 sequential
// trials per run, seeds 1..N, median and quartiles of the best value found. The
// multi-fidelity algorithms are also measured at equal budget on the same problems
// given learning curves (see optimiseBudget).
//
// By default the tests run a quick form (Branin and Hartmann-6, 3 seeds) that asserts
// the acceptance bars; -hpo.seeds=20 runs every problem with 20 seeds and prints the
// tables of docs/hpo.md.

var qualitySeeds = flag.Int("hpo.seeds", 0, "seeds of the full side-by-side quality protocol (docs/hpo.md uses 20); 0 runs the quick form")

var qualityProblems = flag.String("hpo.problems", "", "with -hpo.seeds, run only the problems whose name starts with one of these comma-separated prefixes")

// qualityPlan returns the problems and the number of seeds to run.
func qualityPlan() ([]problem, int) {
	if *qualitySeeds <= 0 {
		return problems[:2], 3
	}
	if *qualityProblems == "" {
		return allProblems(), *qualitySeeds
	}
	var out []problem
	for _, pr := range allProblems() {
		for pre := range strings.SplitSeq(*qualityProblems, ",") {
			if pre != "" && strings.HasPrefix(pr.name, pre) {
				out = append(out, pr)
				break
			}
		}
	}
	return out, *qualitySeeds
}

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
// on Hartmann-6 and, with 20 seeds or more, that GP and CMA-ES beat TPE's there and
// that TPE and GP are not worse than Optuna 3.1's TPE on Branin, Hartmann-6 and
// Rosenbrock-10 (recorded in testdata/optuna_tpe_quality.json).
func TestSamplersSideBySide(t *testing.T) {
	probs, seeds := qualityPlan()
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
	// With the full protocol, tpe and gp are held to Optuna 3.1's TPE on the problems
	// recorded by hpo/testdata/optuna_tpe_quality.py (seeds 1..20): neither may have a
	// worse median that a rank-sum test tells apart (p < 0.05).
	var optuna qualityRecord
	if seeds >= 20 {
		data, err := os.ReadFile("testdata/optuna_tpe_quality.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &optuna); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("| problem | %s | known optimum |", strings.Join(head, " | "))
	t.Logf("|---|%s---|", strings.Repeat("---|", len(samplers)))
	for _, pr := range probs {
		row := []string{pr.name}
		meds := map[string]float64{}
		for _, sc := range samplers {
			var bests []float64
			for seed := int64(1); seed <= int64(seeds); seed++ {
				bests = append(bests, optimise(t, sc.s, pr, seed, trials))
			}
			_, meds[sc.name], _ = quartiles(bests)
			row = append(row, fmtQ(bests))
			if ref := optuna[pr.name]["optuna-tpe"]; len(ref) > 0 && (sc.name == "tpe" || sc.name == "gp") {
				_, refMed, _ := quartiles(ref)
				p := rankSumP(bests, ref[:min(len(ref), seeds)])
				t.Logf("%s: %s median %s against Optuna 3.1's TPE %s (rank-sum p = %.3g)", pr.name, sc.name, fmtV(meds[sc.name]), fmtV(refMed), p)
				if meds[sc.name] > refMed && p < 0.05 {
					t.Errorf("%s: %s median %s is worse than Optuna 3.1's TPE %s (p = %.3g)", pr.name, sc.name, fmtV(meds[sc.name]), fmtV(refMed), p)
				}
			}
		}
		t.Logf("| %s | %s |", strings.Join(row, " | "), fmtV(pr.optimum))
		if strings.HasPrefix(pr.name, "Hartmann") {
			for _, name := range []string{"tpe", "cmaes", "gp", "bohb"} {
				if !(meds[name] < meds["random"]) {
					t.Errorf("%s: %s median %.4f does not beat random's %.4f", pr.name, name, meds[name], meds["random"])
				}
			}
		}
		if strings.HasPrefix(pr.name, "Hartmann") {
			for _, name := range []string{"gp", "cmaes"} {
				t.Logf("Hartmann-6: %s median %.4f vs tpe %.4f: beats TPE: %v", name, meds[name], meds["tpe"], meds[name] < meds["tpe"])
				// The bar, judged on the full protocol (20 seeds) only.
				if seeds >= 20 && !(meds[name] < meds["tpe"]) {
					t.Errorf("Hartmann-6: %s median %.4f does not beat TPE's %.4f", name, meds[name], meds["tpe"])
				}
			}
		}
	}
}

// curveScale is, per problem, the size of the learning-curve term of optimiseBudget:
// about the spread of the objective over the space.
var curveScale = map[string]float64{
	"Branin (2-d)": 20, "Hartmann-6 (6-d)": 1, "noisy Branin (σ=1)": 20,
	"Rosenbrock (10-d)": 1e5, "mixed (5-d: log float, int, log int, categorical, stepped float)": 1,
}

const (
	curveSteps  = 27  // steps of a trial that runs to the end (η = 3: rungs 1, 3, 9)
	curveBudget = 100 // budget in whole trials: 100·27 steps
)

// curveAt is the value a trial of pr with params p reports at step: the objective plus
// scale·exp(−step/τ), with τ in [1, 8] fixed per configuration (from a hash of its
// values), so curves of nearby values cross. At the last step the term is small but
// not zero; the best value found is judged on the objective alone.
func curveAt(pr problem, p map[string]float64, step int64, r *rng) float64 {
	h := uint64(0)
	for _, q := range pr.space {
		h = mix64(h ^ uint64(int64(p[q.Name]*1e6)))
	}
	tau := 1 + 7*float64(h>>11)*0x1p-53
	return pr.f(p, r) + curveScale[pr.name]*math.Exp(-float64(step)/tau)
}

// optimiseBudget runs trials one at a time, each reporting at steps 1..curveSteps and
// asked to st after each report, until curveBudget·curveSteps steps are spent. It
// returns the best objective (noise-free for a noisy problem) of a trial that ran to
// the end, and the number of trials run.
func optimiseBudget(t testing.TB, s Sampler, st Stopper, pr problem, seed int64) (float64, int) {
	h := History{Space: pr.space, Direction: Minimize, Seed: seed}
	spent, best := 0, math.Inf(1)
	for id := 0; spent < curveBudget*curveSteps; id++ {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatalf("%s seed %d trial %d: %v", pr.name, seed, id, err)
		}
		tr := Trial{ID: id, Params: p, State: TrialRunning}
		for step := int64(1); step <= curveSteps && spent < curveBudget*curveSteps; step++ {
			spent++
			v := curveAt(pr, p, step, newRNG(seed, id*100+int(step), 0x4e4f495345))
			tr.Reports = append(tr.Reports, Report{Step: step, Value: v})
			tr.Value = &v
			if step == curveSteps {
				tr.State = TrialCompleted
				val := pr.f(p, newRNG(seed, id, 0x4e4f495345))
				if pr.truth != nil {
					val = pr.truth(p)
				}
				best = math.Min(best, val)
				break
			}
			if st.ShouldStop(h, tr) {
				tr.State = TrialPruned
				break
			}
		}
		if tr.State == TrialRunning {
			break // the budget ran out mid-trial
		}
		h.Trials = append(h.Trials, tr)
	}
	return best, len(h.Trials)
}

// TestMultiFidelitySideBySide compares, at an equal budget of 100 whole trials' steps,
// random search and TPE without stopping, random search with ASHA, Hyperband (random
// search in Hyperband brackets) and BOHB. It asserts that Hyperband and BOHB beat
// random search without stopping on Hartmann-6.
func TestMultiFidelitySideBySide(t *testing.T) {
	probs, seeds := qualityPlan()
	none, _ := NewStopper(StopperNone)
	asha, _ := NewStopper(StopperASHA, ASHAMaxResource(curveSteps))
	hb, err := NewStopper(StopperHyperband, ASHAMaxResource(curveSteps))
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name string
		s    Sampler
		st   Stopper
	}{
		{"random", mustSampler(t, SamplerRandom), none},
		{"tpe", mustSampler(t, SamplerTPE), none},
		{"random+asha", mustSampler(t, SamplerRandom), asha},
		{"hyperband", mustSampler(t, SamplerRandom), hb},
		{"bohb", mustSampler(t, SamplerBOHB, BOHBBudgets(1, 3, curveSteps)), hb},
	}
	var head []string
	for _, r := range runs {
		head = append(head, r.name)
	}
	t.Logf("| problem | %s |", strings.Join(head, " | "))
	t.Logf("|---|%s", strings.Repeat("---|", len(runs)))
	for _, pr := range probs {
		row := []string{pr.name}
		meds := map[string]float64{}
		for _, r := range runs {
			var bests []float64
			trials := 0
			for seed := int64(1); seed <= int64(seeds); seed++ {
				b, n := optimiseBudget(t, r.s, r.st, pr, seed)
				bests = append(bests, b)
				trials += n
			}
			_, meds[r.name], _ = quartiles(bests)
			row = append(row, fmt.Sprintf("%s (%d trials)", fmtQ(bests), trials/seeds))
		}
		t.Logf("| %s |", strings.Join(row, " | "))
		if strings.HasPrefix(pr.name, "Hartmann") {
			for _, name := range []string{"hyperband", "bohb"} {
				if !(meds[name] < meds["random"]) {
					t.Errorf("%s: %s median %.4f does not beat random's %.4f at equal budget", pr.name, name, meds[name], meds["random"])
				}
			}
		}
	}
}
