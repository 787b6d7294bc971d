package hpo

import (
	"fmt"
	"math"
	"testing"
)

// sphereValue is a sphere function of a trial's floats around 0.3, the objective of the
// memo's tests and benchmarks.
func sphereValue(p map[string]float64) float64 {
	v := 0.0
	for _, x := range p {
		v += (x - 0.3) * (x - 0.3)
	}
	return v
}

// The memo changes no suggestion: a sampler that remembers its replays and one that
// replays from scratch every time (no memo) suggest the same points, over a run long
// enough to restart (a flat stretch), with pruned and failed trials, when histories of
// other seeds are interleaved (the memo is then dropped and rebuilt), and when an
// earlier trial's value is rewritten (its generation's hash changes).
func TestCMAESMemoChangesNoSuggestion(t *testing.T) {
	space := benchSpace(4, false)
	memo, _ := NewCMAES(PopulationSize(4))
	fresh, _ := NewCMAES(PopulationSize(4))
	fresh.memo = nil
	hs := []History{
		{Space: space, Direction: Minimize, Seed: 1},
		{Space: space, Direction: Minimize, Seed: 2},
	}
	hits := 0
	for id := range 240 {
		for k := range hs {
			h := &hs[k]
			got, err := memo.Suggest(*h, id)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := fresh.Suggest(*h, id)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d trial %d: with the memo %v, without %v", h.Seed, id, got, want)
			}
			if len(memo.memo.gens) > 0 {
				hits++
			}
			v := sphereValue(got)
			if id > 120 && id < 180 {
				v = 1 // flat: the strategy converges and restarts
			}
			tr := Trial{ID: id, Params: got, State: TrialCompleted, Value: &v}
			switch id % 11 {
			case 3:
				tr.State, tr.Value = TrialPruned, nil
				tr.Reports = []Report{{Step: 1, Value: v + 1}}
			case 7:
				tr.State, tr.Value = TrialFailed, nil
			}
			h.Trials = append(h.Trials, tr)
		}
	}
	// Rewrite an early value: every generation from there on hashes differently.
	v := -1.0
	hs[0].Trials[5].Value, hs[0].Trials[5].State = &v, TrialCompleted
	got, _ := memo.Suggest(hs[0], 240)
	want, _ := fresh.Suggest(hs[0], 240)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a rewritten value: with the memo %v, without %v", got, want)
	}
	if hits == 0 {
		t.Fatal("the memo never held a generation")
	}
}

// The memo is really used: after a run of 200 trials it holds every whole generation,
// and a suggestion on a history it has seen resumes from them, replacing none.
func TestCMAESMemoResumes(t *testing.T) {
	space := benchSpace(3, false)
	s, _ := NewCMAES(PopulationSize(5))
	h := History{Space: space, Direction: Minimize, Seed: 4}
	for id := range 200 {
		p, err := s.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		v := sphereValue(p)
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	// The history's last generation is taken in by this call; a second call on the same
	// history finds every generation in the memo and stores nothing.
	if _, err := s.Suggest(h, 200); err != nil {
		t.Fatal(err)
	}
	gens := len(s.memo.gens)
	if gens < 10 {
		t.Fatalf("%d generations in the memo after 200 trials of population 5 or more", gens)
	}
	stored := make([]*cma, gens)
	for i, e := range s.memo.gens {
		stored[i] = e.st
	}
	if _, err := s.Suggest(h, 200); err != nil {
		t.Fatal(err)
	}
	if len(s.memo.gens) != gens {
		t.Fatalf("a second suggestion on the same history: %d generations in the memo, before %d", len(s.memo.gens), gens)
	}
	for i, e := range s.memo.gens {
		if e.st != stored[i] {
			t.Fatalf("a second suggestion on the same history replaced generation %d", i)
		}
		if math.IsNaN(e.st.sigma) {
			t.Fatalf("generation %d: stored step size is NaN", i)
		}
	}
}

// BenchmarkCMAESGrowingHistory times the suggestions of an experiment as it runs: trial
// after trial is suggested, completed (a sphere value) and added to the history, as the
// experiment workflow does. It reports the mean per suggestion over the last 50 trials
// of 500, with 16 floats, for the sampler as it is (memo) and replaying every call
// (replay), the cost this change removed. Optuna's CmaEsSampler doing the same is
// hpo/testdata/optuna_cmaes_bench.py.
func BenchmarkCMAESGrowingHistory(b *testing.B) {
	const trials, last = 500, 50
	space := benchSpace(16, false)
	for _, mode := range []string{"memo", "replay"} {
		b.Run(fmt.Sprintf("%s/trials=%d/params=16", mode, trials), func(b *testing.B) {
			var total float64
			for range b.N {
				s, _ := NewCMAES()
				if mode == "replay" {
					s.memo = nil
				}
				h := History{Space: space, Direction: Minimize, Seed: 7}
				for id := range trials {
					cpu0, _ := cpuTime()
					p, err := s.Suggest(h, id)
					if err != nil {
						b.Fatal(err)
					}
					if id >= trials-last {
						cpu1, _ := cpuTime()
						total += (cpu1 - cpu0).Seconds()
					}
					v := sphereValue(p)
					h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
				}
			}
			b.ReportMetric(total*1e3/float64(b.N*last), "cpu-ms/suggestion")
		})
	}
}
