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

// BenchmarkQualityRecord runs samplers on the side-by-side problems (quality_all_test.go)
// and records every seed's best value, so that two versions of a sampler, or a sampler
// and Optuna (hpo/testdata/optuna_tpe_quality.py writes the same format), can be compared
// by a rank-sum test. It is a benchmark so that it runs only when asked for:
//
//	go test ./hpo -run '^$' -bench QualityRecord -benchtime 1x -hpo.seeds=20 \
//	    -hpo.problems=Branin,Hartmann,Rosen -hpo.samplers=tpe,tpe-mv,gp \
//	    -hpo.record=/tmp/after.json -hpo.compare=testdata/optuna_tpe_quality.json
//
// -hpo.trials sets the trials per run (100 by default).
//
// It prints, per problem and sampler, the median [quartiles] over the seeds and, for each
// sampler of the -hpo.compare file on the same problem, the two-sided Mann-Whitney p.
func BenchmarkQualityRecord(b *testing.B) {
	probs, seeds := qualityPlan()
	if *qualitySeeds <= 0 {
		seeds = 20
	}
	var cmpRec qualityRecord
	if *recordCompare != "" {
		data, err := os.ReadFile(*recordCompare)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(data, &cmpRec); err != nil {
			b.Fatalf("%s: %v", *recordCompare, err)
		}
	}
	rec := qualityRecord{}
	for range b.N {
		for _, pr := range probs {
			rec[pr.name] = map[string][]float64{}
			for name := range strings.SplitSeq(*recordSamplers, ",") {
				s := recordSampler(b, name)
				var bests []float64
				for seed := int64(1); seed <= int64(seeds); seed++ {
					bests = append(bests, optimise(b, s, pr, seed, *recordTrials))
				}
				rec[pr.name][name] = bests
				var line strings.Builder
				fmt.Fprintf(&line, "%s | %s | %s", pr.name, name, fmtQ(bests))
				for _, other := range sortedKeys(cmpRec[pr.name]) {
					fmt.Fprintf(&line, " | vs %s %s: p = %.3g", other, fmtQ(cmpRec[pr.name][other]), rankSumP(bests, cmpRec[pr.name][other]))
				}
				b.Log(line.String())
			}
		}
	}
	if *recordOut != "" {
		data, err := json.MarshalIndent(rec, "", " ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(*recordOut, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

var (
	recordSamplers = flag.String("hpo.samplers", "tpe,tpe-mv,gp", "BenchmarkQualityRecord: comma-separated samplers (tpe, tpe-mv, tpe-density, tpe-mv-unscaled, tpe-mv-density, gp, cmaes, random, ...)")
	recordOut      = flag.String("hpo.record", "", "BenchmarkQualityRecord: write every seed's best value to this JSON file")
	recordCompare  = flag.String("hpo.compare", "", "BenchmarkQualityRecord: a JSON file of the same format to compare with (rank-sum p)")
	recordTrials   = flag.Int("hpo.trials", 100, "BenchmarkQualityRecord: trials per run")
)

// qualityRecord is problem → sampler → best value per seed (seeds 1..N in order).
type qualityRecord map[string]map[string][]float64

// recordSampler is the sampler a -hpo.samplers name stands for: a sampler name of New,
// or tpe-mv (multivariate TPE), tpe-density (univariate TPE with TPEScoresDensity, TPE
// before issue 42), tpe-mv-unscaled (multivariate TPE with TPEScoresUnscaled, its
// default since 2026-12-07) or tpe-mv-density (multivariate TPE with TPEScoresDensity,
// its default before).
func recordSampler(b *testing.B, name string) Sampler {
	switch name {
	case "tpe-mv-density":
		return mustSampler(b, SamplerTPE, TPEMultivariate(true), TPEKernelScores(TPEScoresDensity))
	case "tpe-mv":
		return mustSampler(b, SamplerTPE, TPEMultivariate(true))
	case "tpe-density":
		return mustSampler(b, SamplerTPE, TPEKernelScores(TPEScoresDensity))
	case "tpe-mv-unscaled":
		return mustSampler(b, SamplerTPE, TPEMultivariate(true), TPEKernelScores(TPEScoresUnscaled))
	}
	return mustSampler(b, name)
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rankSumP is the two-sided p-value of the Mann-Whitney U test (Wilcoxon rank-sum) of
// samples a and b: the normal approximation with the tie correction and a continuity
// correction, fine from about 8 values per sample.
func rankSumP(a, b []float64) float64 {
	n1, n2 := float64(len(a)), float64(len(b))
	if n1 == 0 || n2 == 0 {
		return math.NaN()
	}
	type obs struct {
		v     float64
		first bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int { return cmpFloat(x.v, y.v) })
	n := n1 + n2
	r1, ties := 0.0, 0.0
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].first {
				r1 += rank
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	u := r1 - n1*(n1+1)/2
	mu := n1 * n2 / 2
	sd := math.Sqrt(n1 * n2 / 12 * (n + 1 - ties/(n*(n-1))))
	if sd == 0 {
		return 1
	}
	z := math.Max(math.Abs(u-mu)-0.5, 0) / sd
	return math.Min(1, 2*(1-normCDF(z)))
}

func TestRankSumP(t *testing.T) {
	// Identical samples: no evidence of a difference.
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := rankSumP(a, a); p < 0.99 {
		t.Errorf("same samples: p = %v, want about 1", p)
	}
	// Completely separated samples of 10: exact two-sided p = 2/C(20,10) ≈ 1.1e-5; the
	// normal approximation gives about 1.8e-4.
	b := []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if p := rankSumP(a, b); p > 3e-4 || p < 1e-5 {
		t.Errorf("separated samples: p = %v, want about 1.8e-4", p)
	}
	if p1, p2 := rankSumP(a, b), rankSumP(b, a); math.Abs(p1-p2) > 1e-15 {
		t.Errorf("p is not symmetric: %v and %v", p1, p2)
	}
	// U = 17 of 20: z = (17 − 10 − ½)/√(20·10/12) = 1.592, p = 0.1113 (the exact p is 0.111).
	x := []float64{19, 22, 16, 29, 24}
	y := []float64{20, 11, 17, 12}
	if p := rankSumP(x, y); math.Abs(p-0.1113) > 0.002 {
		t.Errorf("textbook case: p = %v, want 0.1113", p)
	}
}
