package hpo

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// The synthetic learning-curve benchmark that the early-stopping rules are held to.
//
// 81 configurations form a 9×9 grid over a learning rate in [1e-4, 1] and a weight decay
// in [1e-6, 1e-2], both log-spaced half a decade apart. Each configuration's loss falls
// from 1 towards its asymptote as exp(−step/tau), and every report adds Gaussian noise
// (seeded by seed, trial and step). The asymptote is a bowl, 0.05 + 0.6x² + 0.4y² in the
// grid's centred coordinates, whose minimum is the grid point (1e-2, 1e-4). Two rate
// models:
//
//   - aligned: tau = (2 + 6·(asymptote − 0.05))·(1 + jitter·u), u in [−1, 1] fixed per
//     configuration: configurations that end worse also learn more slowly, up to a jitter
//     that lets nearby curves cross. This is the benchmark of the acceptance test.
//   - crossing: tau = 3·10^(−2x·0.25): a larger learning rate learns faster whatever its
//     asymptote, so fast configurations that end badly lead early: the late-bloomer case
//     in which any rule that judges on early steps can stop the eventual best.
//
// The configurations run in an order shuffled by seed, workers at a time, 81 steps each.

// curve is one configuration's noise-free learning curve.
type curve struct {
	asym, tau float64
}

func (c curve) at(step int64) float64 {
	return c.asym + (1-c.asym)*math.Exp(-float64(step)/c.tau)
}

type curveModel struct {
	crossing bool
	jitter   float64 // aligned model only
	noise    float64
}

func (m curveModel) String() string {
	if m.crossing {
		return fmt.Sprintf("crossing, noise %.3f", m.noise)
	}
	return fmt.Sprintf("aligned, jitter %.1f, noise %.3f", m.jitter, m.noise)
}

// acceptanceCurves is the benchmark of the acceptance tests.
var acceptanceCurves = curveModel{jitter: 0.2, noise: 0.01}

func (m curveModel) curves(seed int64) []curve {
	var cs []curve
	for i := range 9 {
		for j := range 9 {
			x := float64(i-4) / 4 // log10(lr) = −2 + 2x
			y := float64(j-4) / 4 // log10(wd) = −4 + 2y
			asym := 0.05 + 0.6*x*x + 0.4*y*y
			var tau float64
			if m.crossing {
				tau = 3 * math.Pow(10, -2*x*0.25)
			} else {
				u := float64(mix64(uint64(i*9+j))%2001)/1000 - 1
				tau = (2 + 6*(asym-0.05)) * (1 + m.jitter*u)
			}
			cs = append(cs, curve{asym: asym, tau: tau})
		}
	}
	r := newRNG(seed, 0, 0x53485546) // "SHUF"
	for i := len(cs) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		cs[i], cs[j] = cs[j], cs[i]
	}
	return cs
}

type curveResult struct {
	trials    int
	stopped   int // trials stopped before their last step
	stoppedBy int // trials stopped before reaching step `by` (see simulate)
	stepsRun  int64
	steps     int64 // steps had nothing been stopped
	bestKept  bool  // the configuration with the best final value ran to the end
	keptRank  int   // 1-based rank, by final value, of the best configuration that ran to the end
}

// simulate runs the model's configurations, workers at a time (every running trial
// advances one step per tick, and a freed slot starts the next configuration), each up to
// maxStep steps, asking s after every report. stoppedBy counts the trials stopped before
// step by.
func simulate(s Stopper, m curveModel, seed int64, workers int, maxStep, by int64) curveResult {
	curves := m.curves(seed)
	n := len(curves)
	h := History{Direction: Minimize, Seed: seed}
	for id := range n {
		h.Trials = append(h.Trials, Trial{ID: id, Params: map[string]float64{}, State: TrialRunning})
	}
	res := curveResult{trials: n, steps: int64(n) * maxStep}
	next, active := 0, []int{}
	for next < n || len(active) > 0 {
		for len(active) < workers && next < n {
			active = append(active, next)
			next++
		}
		var still []int
		for _, id := range active {
			tr := &h.Trials[id]
			step := int64(len(tr.Reports)) + 1
			v := curves[id].at(step) + m.noise*newRNG(seed, id, uint64(step)).norm()
			tr.Reports = append(tr.Reports, Report{Step: step, Value: v})
			res.stepsRun++
			switch {
			case s.ShouldStop(h, *tr):
				tr.State, tr.Value = TrialPruned, &v
				res.stopped++
				if step < by {
					res.stoppedBy++
				}
			case step >= maxStep:
				tr.State, tr.Value = TrialCompleted, &v
			default:
				still = append(still, id)
			}
		}
		active = still
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpFloat(curves[a].at(maxStep), curves[b].at(maxStep))
	})
	res.bestKept = h.Trials[order[0]].State == TrialCompleted
	for rank, id := range order {
		if h.Trials[id].State == TrialCompleted {
			res.keptRank = rank + 1
			break
		}
	}
	return res
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// curveSummary aggregates a stopper's results over seeds.
type curveSummary struct {
	seeds, kept, worstRank    int
	minStoppedBy, meanStopped float64
	meanStepsFrac             float64
}

func runCurves(s Stopper, m curveModel, seeds, workers int, maxStep, by int64) curveSummary {
	sum := curveSummary{seeds: seeds, minStoppedBy: 1}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		r := simulate(s, m, seed, workers, maxStep, by)
		if r.bestKept {
			sum.kept++
		}
		sum.worstRank = max(sum.worstRank, r.keptRank)
		sum.minStoppedBy = math.Min(sum.minStoppedBy, float64(r.stoppedBy)/float64(r.trials))
		sum.meanStopped += float64(r.stopped) / float64(r.trials) / float64(seeds)
		sum.meanStepsFrac += float64(r.stepsRun) / float64(r.steps) / float64(seeds)
	}
	return sum
}

// TestASHAOnLearningCurves is the acceptance for ASHA (η = 3, rungs at steps 1, 3,
// 9 and 27 of 81): on every seed, run one trial at a time and eight at a time, it stops
// at least half of the trials before their last rung (27), and it never stops the
// configuration whose final value is best.
func TestASHAOnLearningCurves(t *testing.T) {
	s, err := NewStopper(StopperASHA, ASHAReductionFactor(3), ASHAMinResource(1), ASHAMaxResource(81))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.(*ASHAStopper).Rungs(math.MaxInt64), []int64{1, 3, 9, 27}; !slices.Equal(got, want) {
		t.Fatalf("rungs %v, want %v", got, want)
	}
	const seeds = 20
	for _, workers := range []int{1, 8} {
		r := runCurves(s, acceptanceCurves, seeds, workers, 81, 27)
		t.Logf("ASHA, %s, %d configurations, %d at a time, %d seeds: best kept in %d/%d, stopped before rung 27 ≥ %.2f (min over seeds), stopped %.2f, steps run %.2f of all",
			acceptanceCurves, 81, workers, seeds, r.kept, seeds, r.minStoppedBy, r.meanStopped, r.meanStepsFrac)
		if r.kept != seeds {
			t.Errorf("%d at a time: the best configuration was stopped in %d of %d seeds", workers, seeds-r.kept, seeds)
		}
		if r.minStoppedBy < 0.5 {
			t.Errorf("%d at a time: a seed stopped only %.2f of the trials before the last rung, want >= 0.5", workers, r.minStoppedBy)
		}
	}
}

// TestMedianOnLearningCurves is the same sanity check for the median rule (5 startup
// trials, no warm-up): it never stops the best configuration, stops at least half of the
// trials, and saves at least half of the steps.
func TestMedianOnLearningCurves(t *testing.T) {
	const seeds = 20
	for _, avg := range []bool{false, true} {
		s, err := NewStopper(StopperMedian, MedianRunningAverage(avg))
		if err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{1, 8} {
			r := runCurves(s, acceptanceCurves, seeds, workers, 81, 81)
			t.Logf("median (running average %v), %s, %d at a time, %d seeds: best kept in %d/%d, stopped ≥ %.2f (min over seeds), stopped %.2f, steps run %.2f of all",
				avg, acceptanceCurves, workers, seeds, r.kept, seeds, r.minStoppedBy, r.meanStopped, r.meanStepsFrac)
			if r.kept != seeds {
				t.Errorf("running average %v, %d at a time: the best configuration was stopped in %d of %d seeds", avg, workers, seeds-r.kept, seeds)
			}
			if r.minStoppedBy < 0.5 || r.meanStepsFrac > 0.5 {
				t.Errorf("running average %v, %d at a time: stopped ≥ %.2f of trials and ran %.2f of the steps, want >= 0.5 and <= 0.5", avg, workers, r.minStoppedBy, r.meanStepsFrac)
			}
		}
	}
}

// TestStoppersLearningCurveSensitivity measures how the rules fare as curves cross more
// and reports get noisier, including the crossing model where early leaders end badly.
// Whatever the model, both rules must stop at least half of the trials and keep one of
// the five best configurations (of 81) running to the end.
func TestStoppersLearningCurveSensitivity(t *testing.T) {
	asha, err := NewStopper(StopperASHA, ASHAMaxResource(81))
	if err != nil {
		t.Fatal(err)
	}
	med, err := NewStopper(StopperMedian)
	if err != nil {
		t.Fatal(err)
	}
	models := []curveModel{
		{jitter: 0, noise: 0.01}, {jitter: 0.2, noise: 0.005}, {jitter: 0.2, noise: 0.01},
		{jitter: 0.2, noise: 0.02}, {jitter: 0.3, noise: 0.01}, {crossing: true, noise: 0.01},
	}
	const seeds = 20
	t.Logf("| curves | rule | best kept | worst rank of best kept | stopped | steps run |")
	t.Logf("|---|---|---|---|---|---|")
	for _, m := range models {
		for _, rule := range []struct {
			name string
			s    Stopper
		}{{"ASHA", asha}, {"median", med}} {
			r := runCurves(rule.s, m, seeds, 8, 81, 81)
			t.Logf("| %s | %s | %d/%d | %d | %.2f | %.2f |", m, rule.name, r.kept, seeds, r.worstRank, r.meanStopped, r.meanStepsFrac)
			if r.minStoppedBy < 0.5 {
				t.Errorf("%s, %s: a seed stopped only %.2f of the trials", m, rule.name, r.minStoppedBy)
			}
			if r.worstRank > 5 {
				t.Errorf("%s, %s: in some seed the best configuration run to the end ranks %d of 81", m, rule.name, r.worstRank)
			}
		}
	}
}
