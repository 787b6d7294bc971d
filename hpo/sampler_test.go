package hpo

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGridEnumeratesExactlyTheGrid(t *testing.T) {
	tests := map[string]struct {
		space Space
		opts  []Option
		axes  [][]float64 // each parameter's expected values, in order
	}{
		"categorical, int with step, float with step": {
			space: Space{
				{Name: "opt", Type: Categorical, Values: []string{"adam", "sgd", "lamb"}},
				{Name: "layers", Type: Int, Min: 1, Max: 6, Step: 2},
				{Name: "dropout", Type: Float, Min: 0, Max: 1, Step: 0.25},
			},
			axes: [][]float64{{0, 1, 2}, {1, 3, 5}, {0, 0.25, 0.5, 0.75, 1}},
		},
		"int defaults to step 1, float step that does not divide the range": {
			space: Space{
				{Name: "n", Type: Int, Min: -2, Max: 2},
				{Name: "x", Type: Float, Min: 0.1, Max: 1, Step: 0.3},
			},
			axes: [][]float64{{-2, -1, 0, 1, 2}, {0.1, 0.4, 0.7, 1}},
		},
		"float points, linear and log": {
			space: Space{
				{Name: "lr", Type: Float, Min: 1e-3, Max: 1, Log: true},
				{Name: "m", Type: Float, Min: 0, Max: 0.9},
			},
			opts: []Option{GridPoints(4)},
			axes: [][]float64{{1e-3, 1e-2, 1e-1, 1}, {0, 0.3, 0.6, 0.9}},
		},
		"single parameter": {
			space: Space{{Name: "c", Type: Categorical, Values: []string{"x"}}},
			axes:  [][]float64{{0}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, err := NewGrid(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// The expected grid: nested loops, the last parameter fastest.
			want := []map[string]float64{{}}
			for i, axis := range tc.axes {
				var next []map[string]float64
				for _, p := range want {
					for _, v := range axis {
						q := map[string]float64{}
						for _, prev := range tc.space[:i] {
							q[prev.Name] = p[prev.Name]
						}
						q[tc.space[i].Name] = v
						next = append(next, q)
					}
				}
				want = next
			}
			size, err := g.Size(tc.space)
			if err != nil || size != len(want) {
				t.Fatalf("Size() = %d, %v; want %d", size, err, len(want))
			}
			h := History{Space: tc.space, Seed: 1}
			var got []map[string]float64
			for id := 0; ; id++ {
				p, err := g.Suggest(h, id)
				if errors.Is(err, ErrExhausted) {
					break
				}
				if err != nil {
					t.Fatalf("Suggest(%d): %v", id, err)
				}
				got = append(got, p)
				if id > len(want) {
					t.Fatalf("no ErrExhausted after %d points", id)
				}
			}
			approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(a)) })
			if diff := cmp.Diff(want, got, approx); diff != "" {
				t.Errorf("grid mismatch (-want +got):\n%s", diff)
			}
			if _, err := g.Suggest(h, len(want)+5); !errors.Is(err, ErrExhausted) {
				t.Errorf("Suggest past the end = %v, want ErrExhausted", err)
			}
		})
	}
}

func TestGridFloatNeedsStepOrPoints(t *testing.T) {
	g, err := NewGrid()
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Suggest(History{Space: Space{{Name: "lr", Type: Float, Min: 0, Max: 1}}}, 0)
	if err == nil || !errContains(err, `"lr"`) {
		t.Errorf("Suggest() = %v, want an error naming lr", err)
	}
	if _, err := NewGrid(GridPoints(1)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("GridPoints(1) = %v, want ErrInvalidOption", err)
	}
}

func errContains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// mixedSpace exercises every kind of parameter.
var mixedSpace = Space{
	{Name: "lr", Type: Float, Min: 1e-5, Max: 1, Log: true},
	{Name: "momentum", Type: Float, Min: 0.5, Max: 0.99},
	{Name: "dropout", Type: Float, Min: 0, Max: 0.5, Step: 0.05},
	{Name: "layers", Type: Int, Min: 1, Max: 12},
	{Name: "batch", Type: Int, Min: 16, Max: 512, Log: true},
	{Name: "width", Type: Int, Min: 64, Max: 1024, Step: 64},
	{Name: "wd", Type: Float, Min: 1e-6, Max: 1e-2, Step: 1e-6, Log: true},
	{Name: "opt", Type: Categorical, Values: []string{"adam", "sgd", "lamb", "adagrad"}},
}

// mixedHistory is n trials of mixedSpace drawn at random with a synthetic objective, in
// every state: mostly Completed, some Pruned (with reports), Failed and Running.
func mixedHistory(t testing.TB, seed int64, n int) History {
	h := History{Space: mixedSpace, Direction: Minimize, Seed: seed}
	rs, _ := NewRandom()
	for id := range n {
		p, err := rs.Suggest(h, id)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Abs(math.Log10(p["lr"])+3) + math.Abs(p["momentum"]-0.9) + p["dropout"] + math.Abs(p["layers"]-4)/4 + p["opt"]/4
		tr := Trial{ID: id, Params: p, State: TrialCompleted, Value: new(v)}
		switch id % 7 {
		case 3:
			tr.State, tr.Reports = TrialPruned, []Report{{Step: 1, Value: v + 1}, {Step: int64(id%4 + 2), Value: v + 0.5}}
			tr.Value = new(v + 0.5)
		case 5:
			tr.State, tr.Value = TrialFailed, nil
		case 6:
			if id > n-8 {
				tr.State, tr.Value = TrialRunning, nil
			}
		}
		h.Trials = append(h.Trials, tr)
	}
	return h
}

type namedSampler struct {
	name string
	s    Sampler
}

func allSamplers(t testing.TB) []namedSampler {
	var out []namedSampler
	for _, c := range []struct {
		name string
		algo string
		opts []Option
	}{
		{"random", SamplerRandom, nil},
		{"tpe", SamplerTPE, nil},
		{"tpe-multivariate", SamplerTPE, []Option{TPEMultivariate(true)}},
		{"tpe-constant-liar", SamplerTPE, []Option{TPEConstantLiar(true), TPEStartupTrials(3)}},
		{"cmaes", SamplerCMAES, []Option{PopulationSize(4)}},
		{"gp", SamplerGP, []Option{TPEStartupTrials(5)}},
		{"bohb", SamplerBOHB, []Option{TPEStartupTrials(3)}},
		{"nsga2", SamplerNSGA2, []Option{PopulationSize(6)}},
	} {
		s, err := New(c.algo, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, namedSampler{c.name, s})
	}
	return out
}

func TestSamplersArePure(t *testing.T) {
	h := mixedHistory(t, 42, 40)
	reversed := h
	reversed.Trials = slices.Clone(h.Trials)
	slices.Reverse(reversed.Trials)
	other := h
	other.Seed = 43
	for _, ns := range allSamplers(t) {
		t.Run(ns.name, func(t *testing.T) {
			a, err := ns.s.Suggest(h, 40)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				b, err := ns.s.Suggest(h, 40)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a, b); diff != "" {
					t.Fatalf("same history, seed and id gave a different suggestion (-first +again):\n%s", diff)
				}
			}
			b, err := ns.s.Suggest(reversed, 40)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("the order of the trials in the history changed the suggestion (-in order +reversed):\n%s", diff)
			}
			c, err := ns.s.Suggest(other, 40)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Equal(a, c) {
				t.Errorf("seeds 42 and 43 gave the same suggestion %v", a)
			}
			d, err := ns.s.Suggest(h, 41)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Equal(a, d) {
				t.Errorf("ids 40 and 41 gave the same suggestion %v", a)
			}
		})
	}
}

// checkLegal reports how params breaks space, or nil.
func checkLegal(space Space, params map[string]float64) error {
	if len(params) != len(space) {
		return fmt.Errorf("%d params for %d parameters: %v", len(params), len(space), params)
	}
	for _, p := range space {
		v, ok := params[p.Name]
		if !ok || math.IsNaN(v) {
			return fmt.Errorf("%s missing or NaN", p.Name)
		}
		if p.Type == Categorical {
			if v != math.Trunc(v) || v < 0 || int(v) >= len(p.Values) {
				return fmt.Errorf("%s = %v is not an index of %v", p.Name, v, p.Values)
			}
			continue
		}
		if v < p.Min || v > p.Max {
			return fmt.Errorf("%s = %v outside [%v, %v]", p.Name, v, p.Min, p.Max)
		}
		if p.Type == Int && v != math.Trunc(v) {
			return fmt.Errorf("int %s = %v", p.Name, v)
		}
		step := p.Step
		if p.Type == Int && step == 0 {
			step = 1
		}
		if step > 0 {
			k := (v - p.Min) / step
			if math.Abs(k-math.Round(k)) > 1e-9 {
				return fmt.Errorf("%s = %v is not min %v + k·%v", p.Name, v, p.Min, step)
			}
		}
	}
	return nil
}

// randomSpace builds a space of 1–6 parameters of every kind from a seed.
func randomSpace(seed int64) Space {
	r := newRNG(seed, 0, 0x5350)
	n := 1 + r.intn(6)
	var s Space
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		switch r.intn(6) {
		case 0:
			lo := (r.float64() - 0.5) * 100
			s = append(s, Param{Name: name, Type: Float, Min: lo, Max: lo + 0.001 + r.float64()*50})
		case 1:
			lo := math.Pow(10, -8+6*r.float64())
			s = append(s, Param{Name: name, Type: Float, Min: lo, Max: lo * math.Pow(10, 0.1+5*r.float64()), Log: true})
		case 2:
			lo := float64(r.intn(20)) / 10
			step := []float64{0.1, 0.05, 0.25, 0.3, 1e-3}[r.intn(5)]
			s = append(s, Param{Name: name, Type: Float, Min: lo, Max: lo + step*float64(1+r.intn(30)) + step/3, Step: step})
		case 3:
			lo, width := float64(r.intn(100))-50, 1+r.intn(40)
			s = append(s, Param{Name: name, Type: Int, Min: lo, Max: lo + float64(width), Step: float64(min(r.intn(3), width))})
		case 4:
			lo := float64(1 + r.intn(10))
			s = append(s, Param{Name: name, Type: Int, Min: lo, Max: lo + float64(1+r.intn(1000)), Log: true})
		default:
			var vals []string
			for k := 0; k <= r.intn(6); k++ {
				vals = append(vals, fmt.Sprintf("v%d", k))
			}
			s = append(s, Param{Name: name, Type: Categorical, Values: vals})
		}
	}
	return s
}

// TestSamplersRespectTheSpace checks, over 40 random spaces and 40 sequential trials
// each, that every suggestion of every sampler is inside the bounds, on the step grid,
// integral for ints and a valid index for categoricals.
func TestSamplersRespectTheSpace(t *testing.T) {
	grid, err := NewGrid(GridPoints(3))
	if err != nil {
		t.Fatal(err)
	}
	samplers := append(allSamplers(t), namedSampler{"grid", grid})
	for seed := int64(1); seed <= 40; seed++ {
		space := randomSpace(seed)
		if err := Validate(space); err != nil {
			t.Fatalf("seed %d: generated an invalid space: %v", seed, err)
		}
		for _, ns := range samplers {
			h := History{Space: space, Direction: Maximize, Seed: seed}
			for id := range 40 {
				p, err := ns.s.Suggest(h, id)
				if errors.Is(err, ErrExhausted) && ns.name == "grid" {
					break
				}
				if err != nil {
					t.Fatalf("%s, space %d, trial %d: %v", ns.name, seed, id, err)
				}
				if err := checkLegal(space, p); err != nil {
					t.Fatalf("%s, space %d %+v, trial %d: %v", ns.name, seed, space, id, err)
				}
				v := 0.0
				for _, q := range space {
					v += math.Sin(p[q.Name] * float64(len(q.Name)+id%3))
				}
				state := TrialCompleted
				if id%5 == 4 {
					state = TrialPruned
				}
				h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: state, Value: &v,
					Reports: []Report{{Step: int64(id % 3), Value: v}}})
			}
		}
	}
}

// TestRandomDistributions checks the shape of random draws: log-uniform, uniform over an
// int's values and over categories.
func TestRandomDistributions(t *testing.T) {
	space := Space{
		{Name: "lr", Type: Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "x", Type: Float, Min: -1, Max: 3},
		{Name: "n", Type: Int, Min: 1, Max: 4},
		{Name: "q", Type: Float, Min: 0, Max: 1, Step: 0.5},
		{Name: "c", Type: Categorical, Values: []string{"a", "b"}},
	}
	rs, _ := NewRandom()
	const draws = 4000
	var lrLow, xLow int
	counts := map[string]map[float64]int{"n": {}, "q": {}, "c": {}}
	for id := range draws {
		p, err := rs.Suggest(History{Space: space, Seed: 9}, id)
		if err != nil {
			t.Fatal(err)
		}
		if p["lr"] < 1e-2 {
			lrLow++
		}
		if p["x"] < 1 {
			xLow++
		}
		for _, k := range []string{"n", "q", "c"} {
			counts[k][p[k]]++
		}
	}
	within := func(got int, want float64) bool { return math.Abs(float64(got)-want) < 0.1*want+50 }
	if !within(lrLow, draws/2) {
		t.Errorf("lr below its geometric midpoint %d of %d times, want about half", lrLow, draws)
	}
	if !within(xLow, draws/2) {
		t.Errorf("x below its midpoint %d of %d times, want about half", xLow, draws)
	}
	for k, want := range map[string][]float64{"n": {1, 2, 3, 4}, "q": {0, 0.5, 1}, "c": {0, 1}} {
		if len(counts[k]) != len(want) {
			t.Errorf("%s took values %v, want exactly %v", k, counts[k], want)
		}
		for _, v := range want {
			if !within(counts[k][v], float64(draws)/float64(len(want))) {
				t.Errorf("%s = %v drawn %d of %d times, want about 1/%d", k, v, counts[k][v], draws, len(want))
			}
		}
	}
}

func TestTPEStartupCountsFinishedTrialsOnly(t *testing.T) {
	space := Space{{Name: "x", Type: Float, Min: 0, Max: 1}, {Name: "c", Type: Categorical, Values: []string{"a", "b", "c"}}}
	tpe, _ := NewTPE()
	rnd, _ := NewRandom()
	h := History{Space: space, Seed: 3}
	for id := range 30 {
		state := TrialFailed
		if id >= 20 {
			state = TrialRunning
		}
		h.Trials = append(h.Trials, Trial{ID: id, Params: map[string]float64{"x": 0.5, "c": 1}, State: state})
	}
	for id := 9; id >= 0; id-- {
		h.Trials[id].State, h.Trials[id].Value = TrialCompleted, new(float64(id))
		// id completed trials: with fewer than 10, TPE must sample exactly as random does.
		got, _ := tpe.Suggest(h, 30)
		want, _ := rnd.Suggest(h, 30)
		if completed := 10 - id; completed < 10 && !cmp.Equal(got, want) {
			t.Errorf("with %d completed trials TPE suggested %v, want the random draw %v", completed, got, want)
		}
		if id == 0 && cmp.Equal(got, want) {
			t.Errorf("with 10 completed trials TPE still suggested the random draw %v", got)
		}
	}
}

func TestTPESplit(t *testing.T) {
	p := map[string]float64{"x": 0}
	completed := func(id int, v float64) Trial {
		return Trial{ID: id, Params: p, State: TrialCompleted, Value: new(v)}
	}
	pruned := func(id int, step int64, v float64) Trial {
		return Trial{ID: id, Params: p, State: TrialPruned, Reports: []Report{{Step: 0, Value: 99}, {Step: step, Value: v}}}
	}
	var twenty []Trial
	for i := range 20 {
		twenty = append(twenty, completed(i, float64((i*7)%20)))
	}
	tests := map[string]struct {
		h         History
		opts      []Option
		wantBelow []int
		wantAbove int // size of the bad set
	}{
		"best 10% of completed, minimising": {
			h:         History{Trials: twenty},
			wantBelow: []int{0, 3}, // values 0 and 1
			wantAbove: 18,
		},
		"maximising": {
			h:         History{Direction: Maximize, Trials: twenty},
			wantBelow: []int{14, 17}, // values 18 and 19
			wantAbove: 18,
		},
		"pruned rank after completed, furthest first, then by value": {
			h: History{Trials: []Trial{
				pruned(0, 5, 0.1), pruned(1, 9, 0.9), pruned(2, 9, 0.5), completed(3, 100),
				pruned(4, 2, -5), completed(5, 50), pruned(6, 9, 0.7), pruned(7, 1, 0), pruned(8, 3, 0),
				{ID: 9, Params: p, State: TrialFailed, Value: ptr(-1000)},
				{ID: 10, Params: p, State: TrialRunning},
			}},
			opts: []Option{TPEGamma(0.5, 25)},
			// 9 usable trials, ceil(4.5) = 5 good: completed 50 and 100, then the pruned
			// trials that reached step 9, 0.5, 0.7 and 0.9.
			wantBelow: []int{1, 2, 3, 5, 6},
			wantAbove: 4,
		},
		"constant liar puts running trials in the bad set": {
			h:         History{Trials: append(slices.Clone(twenty), Trial{ID: 20, Params: p, State: TrialRunning})},
			opts:      []Option{TPEConstantLiar(true)},
			wantBelow: []int{0, 3},
			wantAbove: 19,
		},
		"gamma is capped at 25": {
			h: func() History {
				var ts []Trial
				for i := range 400 {
					ts = append(ts, completed(i, float64(i)))
				}
				return History{Trials: ts}
			}(),
			wantBelow: func() []int {
				var ids []int
				for i := range 25 {
					ids = append(ids, i)
				}
				return ids
			}(),
			wantAbove: 375,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := NewTPE(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			below, above, _ := s.split(tc.h, -1)
			var got []int
			for _, b := range below {
				got = append(got, b.ID)
			}
			if diff := cmp.Diff(tc.wantBelow, got); diff != "" {
				t.Errorf("good set (-want +got):\n%s", diff)
			}
			if len(above) != tc.wantAbove {
				t.Errorf("bad set has %d trials, want %d", len(above), tc.wantAbove)
			}
		})
	}
}

// TestTPEFocusesOnTheGoodRegion checks the model does what it is for, for each kind of
// parameter: in 100 sequential trials of a one-dimensional problem, most of trials 50 to
// 99 lie near the optimum, where random draws would put a fifth to a third of them.
func TestTPEFocusesOnTheGoodRegion(t *testing.T) {
	tests := map[string]struct {
		p      Param
		f      func(v float64) float64 // objective, minimised
		near   func(v float64) bool
		random float64 // share of random draws that are near
	}{
		"float": {
			p:    Param{Name: "x", Type: Float, Min: 0, Max: 1},
			f:    func(v float64) float64 { return math.Abs(v - 0.8) },
			near: func(v float64) bool { return math.Abs(v-0.8) < 0.1 }, random: 0.2,
		},
		"log float": {
			p:    Param{Name: "lr", Type: Float, Min: 1e-6, Max: 1, Log: true},
			f:    func(v float64) float64 { return math.Abs(math.Log10(v) + 4) },
			near: func(v float64) bool { return math.Abs(math.Log10(v)+4) < 0.6 }, random: 0.2,
		},
		"int": {
			p:    Param{Name: "k", Type: Int, Min: 0, Max: 9},
			f:    func(v float64) float64 { return math.Abs(v - 7) },
			near: func(v float64) bool { return math.Abs(v-7) <= 1 }, random: 0.3,
		},
		"categorical": {
			p:    Param{Name: "c", Type: Categorical, Values: []string{"a", "b", "c", "d"}},
			f:    func(v float64) float64 { return math.Abs(v - 2) },
			near: func(v float64) bool { return v == 2 }, random: 0.25,
		},
	}
	for name, tc := range tests {
		for _, multivariate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/multivariate=%v", name, multivariate), func(t *testing.T) {
				tpe, _ := NewTPE(TPEMultivariate(multivariate))
				h := History{Space: Space{tc.p}, Seed: 5}
				near := 0
				for id := range 100 {
					p, err := tpe.Suggest(h, id)
					if err != nil {
						t.Fatal(err)
					}
					if id >= 50 && tc.near(p[tc.p.Name]) {
						near++
					}
					v := tc.f(p[tc.p.Name])
					h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
				}
				if near < 25 {
					t.Errorf("%d of trials 50-99 near the optimum, want at least half (random: %.0f)", near, tc.random*50)
				}
			})
		}
	}
}

func TestNew(t *testing.T) {
	tests := map[string]struct {
		name    string
		opts    []Option
		wantErr error
	}{
		"grid":          {name: "grid"},
		"random":        {name: "random"},
		"tpe":           {name: "tpe", opts: []Option{TPEStartupTrials(5), TPEEICandidates(48), TPEGamma(0.15, 10), TPEPriorWeight(2)}},
		"unknown":       {name: "smac", wantErr: ErrUnknownAlgorithm},
		"bad gamma":     {name: "tpe", opts: []Option{TPEGamma(1.5, 25)}, wantErr: ErrInvalidOption},
		"bad startup":   {name: "tpe", opts: []Option{TPEStartupTrials(-1)}, wantErr: ErrInvalidOption},
		"bad candidate": {name: "tpe", opts: []Option{TPEEICandidates(0)}, wantErr: ErrInvalidOption},
		"bad prior":     {name: "random", opts: []Option{TPEPriorWeight(0)}, wantErr: ErrInvalidOption},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := New(tc.name, tc.opts...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New(%q) error = %v, want %v", tc.name, err, tc.wantErr)
			}
			if (s == nil) != (tc.wantErr != nil) {
				t.Errorf("New(%q) = %v with error %v", tc.name, s, err)
			}
		})
	}
}

func TestSuggestRejectsAnInvalidSpace(t *testing.T) {
	bad := History{Space: Space{{Name: "lr", Type: Float, Min: 0, Max: 1, Log: true}}}
	grid, _ := NewGrid()
	for _, ns := range append(allSamplers(t), namedSampler{"grid", grid}) {
		if _, err := ns.s.Suggest(bad, 0); !errors.Is(err, ErrInvalidSpace) {
			t.Errorf("%s: Suggest() = %v, want ErrInvalidSpace", ns.name, err)
		}
	}
}
