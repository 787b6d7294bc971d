package hpo

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
)

// Population-based training (Jaderberg et al., 2017), synchronous form: a population of
// members trains in generations of the same number of steps. After each generation the
// members are ranked by the value they reached; each member of the bottom quantile
// copies (exploits) the newest checkpoint and the parameters of a member drawn from the
// top quantile and perturbs (explores) the parameters; the others carry on from their own
// checkpoint with their own parameters. The names follow Ray Tune's scheduler
// (quantile_fraction, resample_probability, perturbation_factors).
//
// Every decision is a pure function of the seed, the generation, the member and the
// previous generation's results, so the Experiment workflow can make it in workflow code.

// PBTConfig configures population-based training.
type PBTConfig struct {
	// QuantileFraction is the share of the population, ranked by value, that is the top
	// (donors) and the bottom (replaced); at most half. Default 0.25.
	QuantileFraction float64
	// ResampleProbability is the chance that explore draws a parameter anew from its
	// range instead of perturbing the donor's value. Default 0.25.
	ResampleProbability float64
	// Factors are what explore multiplies a numeric value by, one drawn with equal
	// chance; a categorical value moves to the neighbouring choice instead. Default
	// 1.2 and 0.8.
	Factors []float64
}

// DefaultPBTConfig is Ray Tune's defaults.
func DefaultPBTConfig() PBTConfig {
	return PBTConfig{QuantileFraction: 0.25, ResampleProbability: 0.25, Factors: []float64{1.2, 0.8}}
}

// Validate reports an out-of-range setting.
func (c PBTConfig) Validate() error {
	switch {
	case !(c.QuantileFraction > 0 && c.QuantileFraction <= 0.5):
		return fmt.Errorf("%w: quantile fraction %v must be in (0, 0.5]", ErrInvalidOption, c.QuantileFraction)
	case !(c.ResampleProbability >= 0 && c.ResampleProbability <= 1):
		return fmt.Errorf("%w: resample probability %v must be in [0, 1]", ErrInvalidOption, c.ResampleProbability)
	case len(c.Factors) == 0:
		return fmt.Errorf("%w: perturbation factors: need at least one", ErrInvalidOption)
	}
	for _, f := range c.Factors {
		if !(f > 0) || !finite(f) {
			return fmt.Errorf("%w: perturbation factor %v must be > 0", ErrInvalidOption, f)
		}
	}
	return nil
}

// PBTMember is what one member reached in the generation that just ended.
type PBTMember struct {
	// Trial is the trial (segment) the member ran in that generation.
	Trial  int                `json:"trial"`
	Params map[string]float64 `json:"params"`
	// Value is the objective at the end of the segment; nil when the segment failed or
	// reported nothing.
	Value *float64 `json:"value,omitempty"`
	// Checkpoint is the newest complete checkpoint the segment left; empty when none.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// PBTDecision is what one member does in the next generation.
type PBTDecision struct {
	// Donor is the trial whose checkpoint and parameters the member copied, or -1 when
	// the member carries on from its own.
	Donor int `json:"donor"`
	// ResumeFrom is the checkpoint the member's next segment starts from (empty: from
	// scratch).
	ResumeFrom string `json:"resumeFrom,omitempty"`
	// Before are the parameters before explore (the donor's, or the member's own);
	// Params are those the next segment runs with.
	Before map[string]float64 `json:"before"`
	Params map[string]float64 `json:"params"`
	// Explore says, per parameter, what explore did: "*1.2", "resampled", "+1"...
	Explore map[string]string `json:"explore,omitempty"`
}

// Salt of PBT's streams.
const saltPBT uint64 = 0x5042_5400 // "PBT"

// PBTInitial draws the parameters member m starts the first generation with: the
// random sampler's suggestion for trial m.
func PBTInitial(space Space, seed int64, member int) (map[string]float64, error) {
	dims, err := newDims(space)
	if err != nil {
		return nil, err
	}
	return randomSuggest(dims, seed, member), nil
}

// PBTNext decides generation gen (1 and up) from what the members reached in generation
// gen-1 (prev, one entry per member in member order). Members with a value and a
// checkpoint are ranked, ties broken by trial; the bottom ⌈n·q⌉ (at most ⌊n/2⌋) and the
// members without a value or checkpoint exploit a member of the top ⌈n·q⌉ drawn at
// random, then explore; when fewer than two members are ranked nobody exploits.
func PBTNext(space Space, dir Direction, cfg PBTConfig, seed int64, gen int, prev []PBTMember) ([]PBTDecision, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dims, err := newDims(space)
	if err != nil {
		return nil, err
	}
	top, replace := pbtQuantiles(dir, cfg.QuantileFraction, prev)
	out := make([]PBTDecision, len(prev))
	for m, p := range prev {
		d := PBTDecision{Donor: -1, ResumeFrom: p.Checkpoint, Before: p.Params, Params: p.Params}
		if replace[m] && len(top) > 0 {
			r := newRNG(seed, gen, saltPBT^uint64(m)<<8)
			donor := prev[top[r.intn(len(top))]]
			d.Donor, d.ResumeFrom, d.Before = donor.Trial, donor.Checkpoint, donor.Params
			d.Params, d.Explore = pbtExplore(dims, cfg, r, donor.Params)
		}
		out[m] = d
	}
	return out, nil
}

// pbtQuantiles returns the members of the top quantile, best first, and which members
// are to be replaced.
func pbtQuantiles(dir Direction, q float64, prev []PBTMember) (top []int, replace []bool) {
	replace = make([]bool, len(prev))
	var ranked []int
	for m, p := range prev {
		if p.Value == nil || p.Checkpoint == "" || math.IsNaN(score(dir, *p.Value)) {
			replace[m] = true
			continue
		}
		ranked = append(ranked, m)
	}
	if len(ranked) < 2 {
		return nil, replace
	}
	sort.SliceStable(ranked, func(i, j int) bool {
		a, b := prev[ranked[i]], prev[ranked[j]]
		sa, sb := score(dir, *a.Value), score(dir, *b.Value)
		if sa != sb {
			return sa < sb
		}
		return a.Trial < b.Trial
	})
	n := len(ranked)
	k := min(int(math.Ceil(float64(n)*q)), n/2)
	for _, m := range ranked[n-k:] {
		replace[m] = true
	}
	return ranked[:k], replace
}

// pbtExplore perturbs params, drawing from r in the order of the space.
func pbtExplore(dims []dim, cfg PBTConfig, r *rng, params map[string]float64) (map[string]float64, map[string]string) {
	out := maps.Clone(params)
	if out == nil {
		out = map[string]float64{}
	}
	what := make(map[string]string, len(dims))
	for i := range dims {
		d := &dims[i]
		// Each parameter draws the same number of values whatever happens, so that one
		// parameter's outcome does not shift the others' draws.
		u, pick, f := r.float64(), r.float64(), cfg.Factors[r.intn(len(cfg.Factors))]
		fresh := d.uniform(newRNG(int64(r.next()), 0, d.salt^saltPBT))
		v, ok := params[d.p.Name]
		switch {
		case !ok || u < cfg.ResampleProbability:
			out[d.p.Name] = fresh
			what[d.p.Name] = "resampled"
		case d.cat:
			step := 1
			if pick < 0.5 {
				step = -1
			}
			i := min(max(int(math.Round(v))+step, 0), d.n-1)
			out[d.p.Name] = float64(i)
			what[d.p.Name] = fmt.Sprintf("%+d", i-int(math.Round(v)))
		default:
			out[d.p.Name] = d.value(d.t(v * f))
			what[d.p.Name] = "*" + strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return out, what
}
