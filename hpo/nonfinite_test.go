package hpo

import (
	"math"
	"testing"
)

// A diverged trainer reports NaN or an infinity. Such a value is a failed objective:
// never the best, not ranked among the good trials by TPE, and it does not make the
// early-stopping rules stop a healthy trial.
func TestNonFiniteObjectivesAreFailed(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, d := range []Direction{Minimize, Maximize} {
		for _, v := range bad {
			trials := []Trial{
				{ID: 0, State: TrialCompleted, Value: new(v)},
				{ID: 1, State: TrialCompleted, Value: new(0.5)},
				{ID: 2, State: TrialCompleted, Value: new(0.7)},
			}
			want := 1
			if d == Maximize {
				want = 2
			}
			if got, ok := Best(History{Direction: d, Trials: trials}); !ok || got.ID != want {
				t.Errorf("%s, value %v: best is trial %d (%v), want %d", d, v, got.ID, ok, want)
			}
			if _, ok := Best(History{Direction: d, Trials: trials[:1]}); ok {
				t.Errorf("%s: a trial whose only value is %v is the best", d, v)
			}

			// TPE: the non-finite trial is ranked neither good nor bad: it is left out.
			p := map[string]float64{"x": 0}
			var h History
			h.Direction = d
			for i := range 10 {
				val := float64(i)
				if i == 0 {
					val = v
				}
				h.Trials = append(h.Trials, Trial{ID: i, Params: p, State: TrialCompleted, Value: new(val)})
			}
			tpe, err := NewTPE()
			if err != nil {
				t.Fatal(err)
			}
			below, above, _ := tpe.split(h, 99)
			for _, b := range append(below, above...) {
				if b.ID == 0 {
					t.Errorf("%s: TPE ranks the trial with value %v", d, v)
				}
			}
			if len(below)+len(above) != 9 {
				t.Errorf("%s: TPE ranks %d trials, want the 9 finite ones", d, len(below)+len(above))
			}
		}
	}
}

func TestStoppersAreNotPoisonedByNonFiniteValues(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		// Minimising: completed trials at 1.0, 0.9, 0.8 and one that diverged to v.
		h := History{Direction: Minimize, Trials: []Trial{
			curveTrial(0, TrialCompleted, 1.0, 1.0, 1.0),
			curveTrial(1, TrialCompleted, 0.9, 0.9, 0.9),
			curveTrial(2, TrialCompleted, 0.8, 0.8, 0.8),
			curveTrial(3, TrialCompleted, v, v, v),
		}}
		median, err := NewStopper(StopperMedian, MedianStartupTrials(1))
		if err != nil {
			t.Fatal(err)
		}
		// 0.85 at step 2 beats the median of 1.0, 0.9, 0.8 (0.9): it goes on whatever
		// the diverged trial reported. -Inf would be the "median" of a poisoned set.
		if median.ShouldStop(h, curveTrial(9, TrialRunning, 0.85, 0.85)) {
			t.Errorf("median: a trial at 0.85 stopped next to a trial at %v", v)
		}
		// The diverged trial itself is stopped.
		if !median.ShouldStop(h, curveTrial(9, TrialRunning, v, v)) {
			t.Errorf("median: a running trial reporting %v goes on", v)
		}
		asha, err := NewStopper(StopperASHA, ASHAReductionFactor(2), ASHAMinTrialsAtRung(1))
		if err != nil {
			t.Fatal(err)
		}
		// At the rung at step 1, a trial at 0.7 is the best of 1.0, 0.9, 0.8, v, 0.7:
		// the diverged trial must not rank first.
		if asha.ShouldStop(h, curveTrial(9, TrialRunning, 0.7)) {
			t.Errorf("asha: the best trial at a rung stopped next to a trial at %v", v)
		}
		if !asha.ShouldStop(h, curveTrial(9, TrialRunning, v)) {
			t.Errorf("asha: a running trial reporting %v goes on", v)
		}
	}
}
