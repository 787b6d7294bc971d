package hpo

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzSearchSpace builds a search space from arbitrary bounds, steps, scales and
// categorical values. Validate never panics and wraps ErrInvalidSpace; for a space it
// accepts, every sampler's suggestions lie inside it (within bounds, whole for an int,
// a valid index for a categorical) and Format renders every parameter.
func FuzzSearchSpace(f *testing.F) {
	f.Add("float", 1e-5, 1.0, 0.0, true, "", int64(1))
	f.Add("int", 16.0, 256.0, 16.0, false, "", int64(2))
	f.Add("float", 0.0, 0.5, 0.1, false, "", int64(3))
	f.Add("categorical", 0.0, 0.0, 0.0, false, "adam,sgd", int64(4))
	f.Add("int", 1.0, 1.0, 0.0, false, "", int64(5))
	f.Add("float", 0.0, math.Inf(1), 0.0, false, "", int64(6))
	f.Add("int", -1.0, 10.0, 0.0, true, "", int64(7))
	f.Add("categorical", 0.0, 0.0, 0.0, false, "a,a", int64(8))
	f.Add("complex", 0.0, 1.0, 0.0, false, "", int64(9))
	f.Add("float", -1e308, 1e308, 0.0, false, "", int64(10))
	f.Fuzz(func(t *testing.T, typ string, lo, hi, step float64, log bool, values string, seed int64) {
		p := Param{Name: "p", Type: ParamType(typ), Min: lo, Max: hi, Step: step, Log: log}
		if values != "" {
			p.Values = strings.Split(values, ",")
		}
		space := Space{p, {Name: "q", Type: Int, Min: 0, Max: 3}}
		if err := Validate(space); err != nil {
			if !errors.Is(err, ErrInvalidSpace) || err.Error() == "" {
				t.Fatalf("Validate error %v does not wrap ErrInvalidSpace", err)
			}
			return
		}
		for _, name := range []string{SamplerRandom, SamplerGrid, SamplerTPE} {
			s, err := New(name, GridPoints(4), TPEStartupTrials(2))
			if err != nil {
				t.Fatal(err)
			}
			h := History{Space: space, Direction: Minimize, Seed: seed}
			for id := range 4 {
				params, err := s.Suggest(h, id)
				if errors.Is(err, ErrExhausted) {
					break
				}
				if err != nil && name == SamplerGrid && strings.Contains(err.Error(), "a grid axis may have at most") {
					break // a valid space too fine for a grid: refused, not listed
				}
				if err != nil {
					t.Fatalf("%s: suggest %d in a valid space: %v", name, id, err)
				}
				for _, q := range space {
					checkInSpace(t, name, q, params)
				}
				if out := Format(space, params); len(out) != len(space) {
					t.Fatalf("%s: Format rendered %v for %v", name, out, params)
				}
				v := params["q"]
				h.Trials = append(h.Trials, Trial{ID: id, Params: params, State: TrialCompleted, Value: &v})
			}
		}
	})
}

func checkInSpace(t *testing.T, sampler string, p Param, params map[string]float64) {
	t.Helper()
	x, ok := params[p.Name]
	if !ok {
		t.Fatalf("%s: no value for %s in %v", sampler, p.Name, params)
	}
	switch p.Type {
	case Categorical:
		if x != math.Trunc(x) || x < 0 || int(x) >= len(p.Values) {
			t.Fatalf("%s: categorical index %v out of %d values", sampler, x, len(p.Values))
		}
		return
	case Int:
		if x != math.Trunc(x) {
			t.Fatalf("%s: int parameter %s = %v", sampler, p.Name, x)
		}
	}
	if math.IsNaN(x) || x < p.Min || x > p.Max {
		t.Fatalf("%s: %s = %v outside [%v, %v] (step %v, log %v)", sampler, p.Name, x, p.Min, p.Max, p.Step, p.Log)
	}
}
