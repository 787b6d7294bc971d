package hpo

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// The CMA-ES variants behind the sampler's defaults (docs/hpo.md, "How CMA-ES was
// tuned"): `go test ./hpo/ -run '^$' -bench CMAESVariants -benchtime 1x -v -hpo.seeds=20`
// prints, for each problem of the side-by-side protocol (-hpo.problems picks some, and
// "Rastrigin" runs a 4-d Rastrigin instead), the median [quartiles] best value of each
// variant over the seeds, with -hpo.cmatrials trials per run (default 100) and seeds
// starting after -hpo.seedoffset (to check a choice on seeds it was not made on).

var (
	cmaVariantNames = flag.String("hpo.cmavariants", "all", "comma-separated CMA-ES variants (or all) for BenchmarkCMAESVariants")
	cmaTrials       = flag.Int("hpo.cmatrials", 100, "trials per run of BenchmarkCMAESVariants")
	cmaSeedOffset   = flag.Int("hpo.seedoffset", 0, "BenchmarkCMAESVariants runs seeds offset+1..offset+N")
)

// cmaVariants are the variants compared; "default" is defaultCMAConfig.
var cmaVariants = []struct {
	name string
	cfg  cmaConfig
}{
	{"hansen", cmaConfig{sigma0: cmaSigma0, lnCoef: 3, tolX: 1e-8}}, // the previous default: Optuna's
	{"hansen+active", cmaConfig{sigma0: cmaSigma0, lnCoef: 3, tolX: 1e-8, active: true}},
	{"lambda-2ln", cmaConfig{sigma0: cmaSigma0, lnCoef: 2, tolX: 1e-8, active: true}},
	{"lambda-ln", cmaConfig{sigma0: cmaSigma0, lnCoef: 1, tolX: 1e-8, active: true}},
	{"lambda-ln-passive", cmaConfig{sigma0: cmaSigma0, lnCoef: 1, tolX: 1e-8}},
	{"hansen-tolx1e-3", cmaConfig{sigma0: cmaSigma0, lnCoef: 3, tolX: 1e-3, active: true}},
	{"default", defaultCMAConfig},
}

func rastrigin4() problem {
	var sp Space
	for i := range 4 {
		sp = append(sp, Param{Name: fmt.Sprintf("x%d", i), Type: Float, Min: -5.12, Max: 5.12})
	}
	return problem{name: "Rastrigin (4-d)", space: sp, f: func(p map[string]float64, _ *rng) float64 {
		v := 40.0
		for i := range 4 {
			x := p[fmt.Sprintf("x%d", i)]
			v += x*x - 10*math.Cos(2*math.Pi*x)
		}
		return v
	}}
}

func BenchmarkCMAESVariants(t *testing.B) {
	probs, seeds := qualityPlan()
	if *qualityProblems == "Rastrigin" {
		probs = []problem{rastrigin4()}
	}
	want := strings.Split(*cmaVariantNames, ",")
	run := func(s Sampler, pr problem) string {
		var bests []float64
		for seed := int64(*cmaSeedOffset + 1); seed <= int64(*cmaSeedOffset+seeds); seed++ {
			bests = append(bests, optimise(t, s, pr, seed, *cmaTrials))
		}
		return fmtQ(bests)
	}
	t.Logf("| problem | variant | median [quartiles] over seeds %d..%d, %d trials |", *cmaSeedOffset+1, *cmaSeedOffset+seeds, *cmaTrials)
	for _, pr := range probs {
		t.Logf("| %s | tpe | %s |", pr.name, run(mustSampler(t, SamplerTPE), pr))
		for _, v := range cmaVariants {
			if want[0] != "all" && !containsString(want, v.name) {
				continue
			}
			s, _ := NewCMAES()
			s.cfg = v.cfg
			t.Logf("| %s | %s | %s |", pr.name, v.name, run(s, pr))
		}
	}
}

func containsString(xs []string, s string) bool {
	return slices.Contains(xs, s)
}
