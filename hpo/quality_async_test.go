package hpo

import (
	"testing"
)

// optimiseAsync runs trials trials of s on pr, parallelism at a time, as the Experiment
// workflow schedules them (workflows/experiment_slots.go): each trial takes 1 to 10 time
// units (drawn per trial), a new trial is suggested as soon as one finishes, and the
// sampler then sees every trial known: finished ones with their value, running ones as
// TrialRunning with their parameters. It returns the best value found, judged as
// optimise does.
func optimiseAsync(t testing.TB, s Sampler, pr problem, seed int64, trials, parallelism int) float64 {
	h := History{Space: pr.space, Direction: Minimize, Seed: seed}
	type running struct {
		idx int
		end float64
	}
	var runs []running
	now := 0.0
	start := func() {
		id := len(h.Trials)
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatalf("%s seed %d trial %d: %v", pr.name, seed, id, err)
		}
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialRunning})
		runs = append(runs, running{idx: id, end: now + 1 + 9*newRNG(seed, id, 0x534c4f54).float64()}) // "SLOT"
	}
	for len(h.Trials) < min(parallelism, trials) {
		start()
	}
	for len(runs) > 0 {
		first := 0
		for i, r := range runs {
			if r.end < runs[first].end {
				first = i
			}
		}
		r := runs[first]
		runs = append(runs[:first], runs[first+1:]...)
		now = r.end
		tr := &h.Trials[r.idx]
		v := pr.f(tr.Params, newRNG(seed, tr.ID, 0x4e4f495345)) // "NOISE", as optimise
		tr.Value, tr.State = &v, TrialCompleted
		if len(h.Trials) < trials {
			start()
		}
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

// TestTPEBeatsRandomWithSlots holds TPE to TestTPEBeatsRandom's bar when trials run 4 at
// a time and each is suggested as soon as a slot frees, with the running trials'
// parameters known but not their values: over 20 seeds of 100 trials, TPE's median best
// beats random search's on Branin, Hartmann-6 and noisy Branin.
func TestTPEBeatsRandomWithSlots(t *testing.T) {
	const seeds, trials, parallelism = 20, 100, 4
	samplers := []struct {
		name string
		s    Sampler
	}{{"tpe", mustSampler(t, "tpe")}, {"tpe-multivariate", mustSampler(t, "tpe", TPEMultivariate(true))}, {"random", mustSampler(t, "random")}}
	t.Logf("| problem | seeds | trials | parallelism | TPE median best | multivariate TPE median best | random median best | known optimum |")
	t.Logf("|---|---|---|---|---|---|---|---|")
	for _, pr := range problems {
		med := map[string]float64{}
		for _, sc := range samplers {
			var bests []float64
			for seed := int64(1); seed <= seeds; seed++ {
				bests = append(bests, optimiseAsync(t, sc.s, pr, seed, trials, parallelism))
			}
			med[sc.name] = median(bests)
		}
		t.Logf("| %s | %d | %d | %d | %.4f | %.4f | %.4f | %.4f |", pr.name, seeds, trials, parallelism,
			med["tpe"], med["tpe-multivariate"], med["random"], pr.optimum)
		for _, name := range []string{"tpe", "tpe-multivariate"} {
			if !(med[name] < med["random"]) {
				t.Errorf("%s: %s median best %.4f is not better than random's %.4f", pr.name, name, med[name], med["random"])
			}
		}
	}
}
