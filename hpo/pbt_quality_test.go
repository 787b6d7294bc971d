package hpo

import (
	"fmt"
	"math"
	"testing"
)

// The learning-curve benchmark where a hyper-parameter schedule matters, which PBT is
// held to against random search and ASHA at an equal budget of training steps.
//
// A simulated training lowers a loss L from 1, step by step, towards a floor set by the
// learning rate, at a speed set by the learning rate:
//
//	L ← L + k(lr)·(floor(lr, wd) − L),  k(lr) = 1 − exp(−20·lr),
//	floor(lr, wd) = 2·lr + 0.002·(log10(wd) + 4)²
//
// as SGD's noise floor grows with the step size. A large rate gets down fast but stays
// high; a small one could go lower but takes long: the best fixed rate over 100 steps is
// about 0.0025 (final loss near 0.008), while a decaying rate (large early, small late)
// ends several times lower. The weight decay wd only raises the floor away from 1e-4.
// Each report is L times exp(0.05·N(0, 1)), seeded by seed, trial and step; the result
// of a run is the noise-free L of its best trial that trained the 100 steps.
//
// The budget is 16 × 100 steps for each algorithm:
//
//   - random: 16 trials of 100 steps with random search's parameters;
//   - asha: random search's trials one after the other, stopped by ASHA (rungs at 1, 3,
//     9, 27 and 81 steps, η 3) until the budget is spent;
//   - pbt: a population of 16 starting from random search's parameters, generations of
//     perturbationInterval 5 steps (20 generations), Ray Tune's defaults otherwise
//     (quantileFraction 0.25, resampleProbability 0.25, factors 1.2 and 0.8); an exploit
//     copies the donor's L (its checkpoint).
const (
	schedSteps      = 100
	schedPopulation = 16
	schedInterval   = 5
	schedBudget     = schedPopulation * schedSteps
)

func schedSpace() Space {
	return Space{
		{Name: "lr", Type: Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "wd", Type: Float, Min: 1e-6, Max: 1e-2, Log: true},
	}
}

// schedStep is one step of the simulated training.
func schedStep(l float64, p map[string]float64) float64 {
	lr, wd := p["lr"], p["wd"]
	k := 1 - math.Exp(-20*lr)
	d := math.Log10(wd) + 4
	floor := 2*lr + 0.002*d*d
	return l + k*(floor-l)
}

// schedReport is the noisy value reported for loss l.
func schedReport(l float64, seed int64, trial int, step int64) float64 {
	return l * math.Exp(0.05*newRNG(seed, trial*1000+int(step), 0x5343_4844).norm())
}

// schedRandom is random search: 16 whole trials.
func schedRandom(seed int64) float64 {
	dims, _ := newDims(schedSpace())
	best := math.Inf(1)
	for id := range schedPopulation {
		p := randomSuggest(dims, seed, id)
		l := 1.0
		for range schedSteps {
			l = schedStep(l, p)
		}
		best = math.Min(best, l)
	}
	return best
}

// schedASHA is random search stopped by ASHA until the budget is spent.
func schedASHA(t testing.TB, seed int64) (float64, int) {
	st, err := NewStopper(StopperASHA, ASHAMaxResource(schedSteps))
	if err != nil {
		t.Fatal(err)
	}
	dims, _ := newDims(schedSpace())
	h := History{Space: schedSpace(), Direction: Minimize, Seed: seed}
	spent, best := 0, math.Inf(1)
	for id := 0; spent < schedBudget; id++ {
		p := randomSuggest(dims, seed, id)
		tr := Trial{ID: id, Params: p, State: TrialRunning}
		l := 1.0
		for step := int64(1); step <= schedSteps && spent < schedBudget; step++ {
			spent++
			l = schedStep(l, p)
			v := schedReport(l, seed, id, step)
			tr.Reports = append(tr.Reports, Report{Step: step, Value: v})
			tr.Value = &v
			if step == schedSteps {
				tr.State = TrialCompleted
				best = math.Min(best, l)
				break
			}
			if st.ShouldStop(h, tr) {
				tr.State = TrialPruned
				break
			}
		}
		if tr.State == TrialRunning {
			break
		}
		h.Trials = append(h.Trials, tr)
	}
	return best, len(h.Trials)
}

// schedPBT is population-based training of 16 members; it returns the best final loss
// and the number of exploits.
func schedPBT(t testing.TB, seed int64) (float64, int) {
	space := schedSpace()
	params := make([]map[string]float64, schedPopulation)
	loss := make([]float64, schedPopulation)
	for m := range params {
		p, err := PBTInitial(space, seed, m)
		if err != nil {
			t.Fatal(err)
		}
		params[m], loss[m] = p, 1
	}
	exploits := 0
	gens := schedSteps / schedInterval
	for g := range gens {
		prev := make([]PBTMember, schedPopulation)
		for m := range params {
			trial := g*schedPopulation + m
			for range schedInterval {
				loss[m] = schedStep(loss[m], params[m])
			}
			v := schedReport(loss[m], seed, trial, int64((g+1)*schedInterval))
			prev[m] = PBTMember{Trial: trial, Params: params[m], Value: &v, Checkpoint: fmt.Sprintf("ck-%d", trial)}
		}
		if g == gens-1 {
			break
		}
		dec, err := PBTNext(space, Minimize, DefaultPBTConfig(), seed, g+1, prev)
		if err != nil {
			t.Fatal(err)
		}
		next := make([]float64, schedPopulation)
		for m, d := range dec {
			next[m] = loss[m]
			if d.Donor >= 0 {
				next[m] = loss[d.Donor%schedPopulation]
				exploits++
			}
			params[m] = d.Params
		}
		loss = next
	}
	best := math.Inf(1)
	for _, l := range loss {
		best = math.Min(best, l)
	}
	return best, exploits
}

// TestPBTBeatsRandomAndASHAOnSchedules runs the benchmark with 20 seeds (or
// -hpo.seeds) and prints the table of docs/hpo.md; PBT's median must beat both
// random search's and ASHA's.
func TestPBTBeatsRandomAndASHAOnSchedules(t *testing.T) {
	seeds := 20
	if *qualitySeeds > 0 {
		seeds = *qualitySeeds
	}
	var rnd, asha, pbt []float64
	ashaTrials, exploits := 0, 0
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rnd = append(rnd, schedRandom(seed))
		b, n := schedASHA(t, seed)
		asha, ashaTrials = append(asha, b), ashaTrials+n
		b, x := schedPBT(t, seed)
		pbt, exploits = append(pbt, b), exploits+x
	}
	t.Logf("learning-rate schedule benchmark, %d × %d steps, %d seeds: final loss, median [q1, q3]", schedPopulation, schedSteps, seeds)
	t.Logf("| random | asha | pbt |")
	t.Logf("|---|---|---|")
	t.Logf("| %s (16 trials) | %s (%d trials) | %s (%d exploits) |", fmtQ(rnd), fmtQ(asha), ashaTrials/seeds, fmtQ(pbt), exploits/seeds)
	_, mr, _ := quartiles(rnd)
	_, ma, _ := quartiles(asha)
	_, mp, _ := quartiles(pbt)
	if !(mp < mr && mp < ma) {
		t.Errorf("pbt median %.4f does not beat random's %.4f and asha's %.4f", mp, mr, ma)
	}
	// The best fixed learning rate, as a reference for the table.
	bestFixed := math.Inf(1)
	for e := -4.0; e <= 0; e += 0.01 {
		p := map[string]float64{"lr": math.Pow(10, e), "wd": 1e-4}
		l := 1.0
		for range schedSteps {
			l = schedStep(l, p)
		}
		bestFixed = math.Min(bestFixed, l)
	}
	t.Logf("best fixed learning rate (wd 1e-4): final loss %.4f", bestFixed)
}
