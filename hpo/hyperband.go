package hpo

import (
	"fmt"
	"math"
	"slices"
)

// StopperHyperband names the Hyperband early-stopping rule.
const StopperHyperband = "hyperband"

// HyperbandStopper is Hyperband (Li et al., JMLR 2018) run as brackets of ASHA, the
// form of Optuna's HyperbandPruner and of Ray Tune's asynchronous Hyperband. With rungs
// at MinResource·η^k below MaxResource there are s_max+1 brackets, s_max =
// ⌊log_η(MaxResource/MinResource)⌋. Bracket b starts judging at MinResource·η^b: bracket
// 0 is the most aggressive (ASHA itself), the last one lets every trial run to
// MaxResource. Each trial is assigned one bracket, by a hash of the seed and its id,
// with Hyperband's bracket sizes ⌈(s_max+1)/(s+1)·η^s⌉ (s = s_max−b) as weights, and
// is compared only with the trials of its bracket.
type HyperbandStopper struct {
	o       StopperOptions
	minRes  []int64 // first rung of each bracket
	weights []int64 // cumulative bracket weights
}

// newHyperband checks the options and lays out the brackets.
func newHyperband(o StopperOptions) (*HyperbandStopper, error) {
	if o.MaxResource <= 0 {
		return nil, fmt.Errorf("%w: hyperband needs a max resource (the step at which trials end)", ErrInvalidOption)
	}
	if o.MaxResource < o.MinResource {
		return nil, fmt.Errorf("%w: hyperband max resource %d is below min resource %d", ErrInvalidOption, o.MaxResource, o.MinResource)
	}
	eta := int64(o.ReductionFactor)
	hb := &HyperbandStopper{o: o}
	for r := o.MinResource; r <= o.MaxResource; r *= eta {
		hb.minRes = append(hb.minRes, r)
		if r > math.MaxInt64/eta {
			break
		}
	}
	smax := len(hb.minRes) - 1
	acc := int64(0)
	for b := range hb.minRes {
		s := smax - b
		acc += int64(math.Ceil(float64(smax+1) / float64(s+1) * math.Pow(float64(eta), float64(s))))
		hb.weights = append(hb.weights, acc)
	}
	return hb, nil
}

// Brackets returns each bracket's first rung.
func (hb *HyperbandStopper) Brackets() []int64 { return append([]int64(nil), hb.minRes...) }

// Bracket returns the bracket of trial id.
func (hb *HyperbandStopper) Bracket(seed int64, id int) int {
	total := hb.weights[len(hb.weights)-1]
	k := int64(newRNG(seed, id, saltHyperband).intn(int(total)))
	for b, w := range hb.weights {
		if k < w {
			return b
		}
	}
	return len(hb.weights) - 1
}

const saltHyperband uint64 = 0x4859_5045_52 // "HYPER"

// ShouldStop judges t by ASHA among the trials of its bracket.
func (hb *HyperbandStopper) ShouldStop(h History, t Trial) bool {
	b := hb.Bracket(h.Seed, t.ID)
	o := hb.o
	o.MinResource = hb.minRes[b]
	a := &ASHAStopper{o: o}
	sub := h
	sub.Trials = nil
	for _, u := range h.Trials {
		if u.ID != t.ID && hb.Bracket(h.Seed, u.ID) == b {
			sub.Trials = append(sub.Trials, u)
		}
	}
	return a.ShouldStop(sub, t)
}

// BOHBSampler is the model of BOHB (Falkner et al., ICML 2018) run inside the
// hyperband stopping rule's brackets: a third of the trials are drawn at random; the
// others from a multivariate TPE fitted at the largest budget at which at least
// max(StartupTrials, parameters+1) finished trials have a value. The budgets are the
// rung steps MinResource·η^k below MaxResource, where a trial's value is that of its
// first report at or past the step (Pruned trials count at the rungs they reached),
// and the end of training, where the Completed trials' values count. Before any budget
// has enough trials it samples at random.
type BOHBSampler struct {
	o   SamplerOptions
	tpe *TPESampler
}

var _ Sampler = (*BOHBSampler)(nil)

// NewBOHB returns a BOHB sampler; it reads StartupTrials and BOHBBudgets.
func NewBOHB(opts ...Option) (*BOHBSampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	// BOHB's TPE keeps the densities it was measured with (docs/hpo.md).
	tpe, err := NewTPE(TPEMultivariate(true), TPEStartupTrials(0), TPEGamma(0.15, 25), TPEKernelScores(TPEScoresDensity))
	if err != nil {
		return nil, err
	}
	return &BOHBSampler{o: o, tpe: tpe}, nil
}

const (
	saltBOHB       uint64 = 0x424f_4842 // "BOHB"
	bohbRandomRate        = 1.0 / 3
)

// Suggest picks the budget to model and samples from TPE fitted there.
func (s *BOHBSampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	if newRNG(h.Seed, id, saltBOHB).float64() < bohbRandomRate {
		return randomSuggest(dims, h.Seed, id), nil
	}
	trials := finishedByID(h, id)
	need := max(s.o.StartupTrials, len(dims)+1)
	// The end of training first.
	var fin []Trial
	for _, t := range trials {
		if _, ok := completedScore(h.Direction, t); ok {
			fin = append(fin, Trial{ID: t.ID, Params: t.Params, State: TrialCompleted, Value: t.Value, Constraints: t.Constraints})
		}
	}
	if len(fin) >= need {
		return s.model(h, fin, id)
	}
	b := s.o.Budget
	var rungs []int64
	for r := b.MinResource; b.MaxResource == 0 || r < b.MaxResource; r *= int64(b.ReductionFactor) {
		reached := false
		for _, t := range trials {
			if k := len(t.Reports); k > 0 && t.Reports[k-1].Step >= r {
				reached = true
				break
			}
		}
		if !reached || r > math.MaxInt64/int64(b.ReductionFactor) {
			break
		}
		rungs = append(rungs, r)
	}
	for _, rung := range slices.Backward(rungs) {
		var at []Trial
		for _, t := range trials {
			if t.State != TrialCompleted && t.State != TrialPruned {
				continue
			}
			if _, ok := rungValue(h.Direction, t.Reports, rung); !ok {
				continue
			}
			j := firstAtOrPast(t.Reports, rung)
			v := t.Reports[j].Value
			if math.IsNaN(score(h.Direction, v)) {
				continue
			}
			at = append(at, Trial{ID: t.ID, Params: t.Params, State: TrialCompleted, Value: &v, Constraints: t.Constraints})
		}
		if len(at) >= need {
			return s.model(h, at, id)
		}
	}
	return randomSuggest(dims, h.Seed, id), nil
}

func (s *BOHBSampler) model(h History, trials []Trial, id int) (map[string]float64, error) {
	sub := h
	sub.Trials = trials
	return s.tpe.Suggest(sub, id)
}

// firstAtOrPast is the index of the first report at or past step (len when none).
func firstAtOrPast(reps []Report, step int64) int {
	for i, r := range reps {
		if r.Step >= step {
			return i
		}
	}
	return len(reps)
}
