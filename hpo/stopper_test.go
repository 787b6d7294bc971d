package hpo

import (
	"errors"
	"math"
	"testing"
)

// curveTrial builds a trial that reported values at steps 1, 2, ...
func curveTrial(id int, state TrialState, values ...float64) Trial {
	t := Trial{ID: id, State: state}
	for i, v := range values {
		t.Reports = append(t.Reports, Report{Step: int64(i + 1), Value: v})
	}
	if state != TrialRunning && len(values) > 0 {
		t.Value = new(values[len(values)-1])
	}
	return t
}

func TestNewStopper(t *testing.T) {
	tests := map[string]struct {
		name    string
		opts    []StopperOption
		want    any
		wantErr error
	}{
		"none":              {name: "none", want: NoStopper{}},
		"empty is none":     {name: "", want: NoStopper{}},
		"median":            {name: "median", opts: []StopperOption{MedianStartupTrials(3), MedianWarmupSteps(2), MedianMinTrials(2)}, want: &MedianStopper{}},
		"asha":              {name: "asha", opts: []StopperOption{ASHAMinResource(2), ASHAReductionFactor(4), ASHAMaxResource(100), ASHAMaxRungs(3), ASHAMinTrialsAtRung(1)}, want: &ASHAStopper{}},
		"unknown":           {name: "pbt", wantErr: ErrUnknownAlgorithm},
		"eta 1":             {name: "asha", opts: []StopperOption{ASHAReductionFactor(1)}, wantErr: ErrInvalidOption},
		"min resource 0":    {name: "asha", opts: []StopperOption{ASHAMinResource(0)}, wantErr: ErrInvalidOption},
		"negative warm-up":  {name: "median", opts: []StopperOption{MedianWarmupSteps(-1)}, wantErr: ErrInvalidOption},
		"zero min trials":   {name: "median", opts: []StopperOption{MedianMinTrials(0)}, wantErr: ErrInvalidOption},
		"negative startup":  {name: "median", opts: []StopperOption{MedianStartupTrials(-1)}, wantErr: ErrInvalidOption},
		"negative max rung": {name: "asha", opts: []StopperOption{ASHAMaxRungs(-1)}, wantErr: ErrInvalidOption},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := NewStopper(tc.name, tc.opts...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewStopper(%q) error = %v, want %v", tc.name, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			switch tc.want.(type) {
			case NoStopper:
				_, ok := s.(NoStopper)
				if !ok || s.ShouldStop(History{}, curveTrial(0, TrialRunning, math.NaN())) {
					t.Errorf("NewStopper(%q) = %#v, want a NoStopper that never stops", tc.name, s)
				}
			case *MedianStopper:
				if _, ok := s.(*MedianStopper); !ok {
					t.Errorf("NewStopper(%q) = %#v, want *MedianStopper", tc.name, s)
				}
			case *ASHAStopper:
				if _, ok := s.(*ASHAStopper); !ok {
					t.Errorf("NewStopper(%q) = %#v, want *ASHAStopper", tc.name, s)
				}
			}
		})
	}
}

func TestASHARungs(t *testing.T) {
	tests := map[string]struct {
		opts  []StopperOption
		limit int64
		want  []int64
	}{
		"defaults, bounded by the limit": {limit: 100, want: []int64{1, 3, 9, 27, 81}},
		"max resource excludes its rung": {opts: []StopperOption{ASHAMaxResource(81)}, limit: 1000, want: []int64{1, 3, 9, 27}},
		"min resource and eta":           {opts: []StopperOption{ASHAMinResource(2), ASHAReductionFactor(4)}, limit: 200, want: []int64{2, 8, 32, 128}},
		"max rungs":                      {opts: []StopperOption{ASHAMaxRungs(2)}, limit: 1000, want: []int64{1, 3}},
		"limit below the first rung":     {opts: []StopperOption{ASHAMinResource(5)}, limit: 4, want: nil},
		"huge limit does not overflow":   {opts: []StopperOption{ASHAMinResource(1 << 40), ASHAReductionFactor(1 << 20)}, limit: math.MaxInt64, want: []int64{1 << 40, 1 << 60}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := NewStopper(StopperASHA, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := s.(*ASHAStopper).Rungs(tc.limit)
			if len(got) != len(tc.want) {
				t.Fatalf("Rungs(%d) = %v, want %v", tc.limit, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Rungs(%d) = %v, want %v", tc.limit, got, tc.want)
				}
			}
		})
	}
}

func TestASHAShouldStop(t *testing.T) {
	// Six trials already passed rung 1 (step 1) with values 1..6 and rung 3 with 10..60.
	var others []Trial
	for i := 1; i <= 6; i++ {
		v := float64(i)
		others = append(others, curveTrial(i, TrialCompleted, v, v, 10*v, 10*v))
	}
	tests := map[string]stopCase{
		"no report": {
			h: History{Trials: others}, t: Trial{ID: 0, State: TrialRunning}, want: false,
		},
		"in the top third at rung 1": {
			h: History{Trials: others}, t: curveTrial(0, TrialRunning, 1.5), want: false, // rank 2 of 7, keep 2
		},
		"outside the top third at rung 1": {
			h: History{Trials: others}, t: curveTrial(0, TrialRunning, 2.5), want: true, // rank 3 of 7
		},
		"between rungs nothing is judged": {
			h: History{Trials: others}, t: curveTrial(0, TrialRunning, 1.5, 100), want: false,
		},
		"let through at rung 1 is not judged there again": {
			// At step 2 the trial's rung-1 value would now rank worse, but rung 1 was
			// decided when it was crossed.
			h: History{Trials: append(others, curveTrial(7, TrialRunning, 0.1), curveTrial(8, TrialRunning, 0.2))},
			t: curveTrial(0, TrialRunning, 1.5, 100), want: false,
		},
		"judged at rung 3": {
			h: History{Trials: others}, t: curveTrial(0, TrialRunning, 1.5, 1.5, 25), want: true, // rank 3 of 7
		},
		"a report that jumps rungs is judged at each": {
			h:    History{Trials: others},
			t:    Trial{ID: 0, State: TrialRunning, Reports: []Report{{Step: 3, Value: 15}}}, // rung 1: rank 7; rung 3: rank 2
			want: true,
		},
		"maximise": {
			h: History{Direction: Maximize, Trials: others}, t: curveTrial(0, TrialRunning, 5.5), want: false, // rank 2
		},
		"maximise, low value": {
			h: History{Direction: Maximize, Trials: others}, t: curveTrial(0, TrialRunning, 4.5), want: true, // rank 3
		},
		"NaN is worst": {
			h: History{Trials: others}, t: curveTrial(0, TrialRunning, math.NaN()), want: true,
		},
		"too few trials at the rung: let through": {
			h: History{Trials: others[:1]}, t: curveTrial(0, TrialRunning, 5), want: false, // 2 < η
		},
		"too few trials, Optuna-style minimum of 1": {
			h: History{Trials: others[:1]}, t: curveTrial(0, TrialRunning, 5),
			opts: []StopperOption{ASHAMinTrialsAtRung(1)}, want: true, // not the best of 2
		},
		"the trial's own stale copy in the history is ignored": {
			h:    History{Trials: append([]Trial{curveTrial(0, TrialRunning)}, others...)},
			t:    curveTrial(0, TrialRunning, 1.5),
			want: false,
		},
		"every state counts at a rung": {
			h: History{Trials: []Trial{
				curveTrial(1, TrialPruned, 1), curveTrial(2, TrialFailed, 2), curveTrial(3, TrialRunning, 3),
			}},
			t: curveTrial(0, TrialRunning, 2.5), want: true, // rank 3 of 4, keep 1
		},
	}
	checkStops(t, StopperASHA, tests)
}

func TestMedianShouldStop(t *testing.T) {
	// Five completed trials; at step 3 their values are 1..5 (median 3), their running
	// averages (10+v+v)/3 (median 16/3).
	var done []Trial
	for i := 1; i <= 5; i++ {
		v := float64(i)
		done = append(done, curveTrial(i, TrialCompleted, 10, v, v, v))
	}
	tests := map[string]stopCase{
		"better than the median": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 2.5), want: false,
		},
		"worse than the median": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 3.5), want: true,
		},
		"best so far counts, not the latest": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 2, 3.5), want: false,
		},
		"equal to the median is kept": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 3), want: false,
		},
		"running average": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 5), opts: []StopperOption{MedianRunningAverage(true)}, want: false,
		},
		"running average, worse": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 5.5), opts: []StopperOption{MedianRunningAverage(true)}, want: true,
		},
		"maximise": {
			h: History{Direction: Maximize, Trials: done}, t: curveTrial(0, TrialRunning, 0, 0, 2.5), want: true,
		},
		"maximise, better": {
			h: History{Direction: Maximize, Trials: done}, t: curveTrial(0, TrialRunning, 0, 0, 3.5), want: false,
		},
		"before the startup trials complete": {
			h: History{Trials: done[:4]}, t: curveTrial(0, TrialRunning, 20, 9, 100), want: false,
		},
		"fewer startup trials": {
			h: History{Trials: done[:4]}, t: curveTrial(0, TrialRunning, 20, 9, 100), opts: []StopperOption{MedianStartupTrials(4)}, want: true,
		},
		"during warm-up": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 100), opts: []StopperOption{MedianWarmupSteps(4)}, want: false,
		},
		"after warm-up": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 100), opts: []StopperOption{MedianWarmupSteps(3)}, want: true,
		},
		"others did not reach the step": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 20, 20, 20, 20), want: false,
		},
		"min trials at the step": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, 20, 9, 100), opts: []StopperOption{MedianMinTrials(6)}, want: false,
		},
		"running and pruned trials are not compared with": {
			h: History{Trials: append(append([]Trial{}, done...),
				curveTrial(6, TrialPruned, 100, 100, 100), curveTrial(7, TrialRunning, 100, 100, 100), curveTrial(8, TrialRunning, 100, 100, 100))},
			t: curveTrial(0, TrialRunning, 20, 9, 3.5), want: true,
		},
		"only NaN": {
			h: History{Trials: done}, t: curveTrial(0, TrialRunning, math.NaN()), want: true,
		},
		"no report": {
			h: History{Trials: done}, t: Trial{ID: 0, State: TrialRunning}, want: false,
		},
	}
	checkStops(t, StopperMedian, tests)
}

// stopCase is a history, the trial asked about, the stopper's options, and whether it
// should stop the trial.
type stopCase struct {
	h    History
	t    Trial
	opts []StopperOption
	want bool
}

// checkStops asks stopper name about each case.
func checkStops(t *testing.T, name string, tests map[string]stopCase) {
	t.Helper()
	for caseName, tc := range tests {
		t.Run(caseName, func(t *testing.T) {
			s, err := NewStopper(name, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.ShouldStop(tc.h, tc.t); got != tc.want {
				t.Errorf("ShouldStop() = %v, want %v", got, tc.want)
			}
		})
	}
}
