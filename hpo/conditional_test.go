package hpo

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func fp(v float64) *float64 { return new(v) }

// condSpace is optimizer ∈ {sgd, adam} with a learning rate of its own each, momentum
// only with sgd, and width2 only when layers ≥ 2 (nested: layers only with adam).
func condSpace(withConditions bool) Space {
	s := Space{
		{Name: "optimizer", Type: Categorical, Values: []string{"sgd", "adam"}},
		{Name: "lr_sgd", Type: Float, Min: 0, Max: 1, Condition: &Condition{Param: "optimizer", Values: []float64{0}}},
		{Name: "momentum", Type: Float, Min: 0, Max: 1, Condition: &Condition{Param: "optimizer", Values: []float64{0}}},
		{Name: "lr_adam", Type: Float, Min: 0, Max: 1, Condition: &Condition{Param: "optimizer", Values: []float64{1}}},
		{Name: "layers", Type: Int, Min: 1, Max: 3, Condition: &Condition{Param: "optimizer", Values: []float64{1}}},
		{Name: "width2", Type: Float, Min: 0, Max: 1, Condition: &Condition{Param: "layers", Min: fp(2)}},
	}
	if !withConditions {
		for i := range s {
			s[i].Condition = nil
		}
	}
	return s
}

func TestActiveFollowsNestedConditions(t *testing.T) {
	s := condSpace(true)
	if err := Validate(s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    map[string]float64
		want []bool
	}{
		{map[string]float64{"optimizer": 0, "lr_sgd": .1, "momentum": .5, "lr_adam": .5, "layers": 3, "width2": .5}, []bool{true, true, true, false, false, false}},
		{map[string]float64{"optimizer": 1, "lr_sgd": .1, "momentum": .5, "lr_adam": .5, "layers": 1, "width2": .5}, []bool{true, false, false, true, true, false}},
		{map[string]float64{"optimizer": 1, "lr_sgd": .1, "momentum": .5, "lr_adam": .5, "layers": 2, "width2": .5}, []bool{true, false, false, true, true, true}},
	} {
		if got := Active(s, c.p); !slices.Equal(got, c.want) {
			t.Errorf("Active(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	act := ActiveParams(s, map[string]float64{"optimizer": 0, "lr_sgd": .1, "momentum": .5, "lr_adam": .5, "layers": 3, "width2": .5})
	if len(act) != 3 || act["lr_sgd"] != .1 {
		t.Errorf("ActiveParams = %v, want optimizer, lr_sgd and momentum", act)
	}
}

func TestConditionValidation(t *testing.T) {
	base := Space{
		{Name: "opt", Type: Categorical, Values: []string{"a", "b"}},
		{Name: "n", Type: Int, Min: 1, Max: 4},
		{Name: "f", Type: Float, Min: 0, Max: 1},
	}
	for _, c := range []struct {
		cond Condition
		want string
	}{
		{Condition{Param: "later"}, "not an earlier parameter"},
		{Condition{Param: "opt"}, "give values, min or max"},
		{Condition{Param: "opt", Values: []float64{2}}, "not a choice"},
		{Condition{Param: "n", Values: []float64{5}}, "not a value"},
		{Condition{Param: "f", Values: []float64{0.5}}, "values needs a categorical or int parameter"},
		{Condition{Param: "opt", Min: fp(0)}, "min and max need a numeric parameter"},
		{Condition{Param: "n", Min: fp(3), Max: fp(2)}, "min is above max"},
	} {
		s := append(slices.Clone(base), Param{Name: "x", Type: Float, Min: 0, Max: 1, Condition: &c.cond})
		err := Validate(s)
		if err == nil || !errors.Is(err, ErrInvalidSpace) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("condition %+v: error %v, want %q", c.cond, err, c.want)
		}
	}
}

// TPE learns a conditional parameter only from the trials in which it was active: the
// observations collect gathers for lr_adam (and collectCat for layers) come from the
// adam trials only when the space has its conditions, from every trial without them.
// Both samplers (independent, and multivariate by groups) still suggest a full point.
func TestTPEUsesConditions(t *testing.T) {
	var trials []*Trial
	for i := range 10 {
		p := map[string]float64{"optimizer": float64(i % 2), "lr_sgd": 0.2, "momentum": 0.9, "lr_adam": 0.05, "layers": 1, "width2": 0.3}
		if i%2 == 1 {
			p["lr_adam"], p["layers"] = 0.8, 3
		}
		v := float64(i)
		trials = append(trials, &Trial{ID: i, Params: p, State: TrialCompleted, Value: &v})
	}
	for _, cond := range []bool{true, false} {
		space := condSpace(cond)
		dims, err := newDims(space)
		if err != nil {
			t.Fatal(err)
		}
		var ws tpeWork
		xs, _ := collect(&ws, dims, 3, trials) // lr_adam
		lrs := slices.Clone(xs)
		cs, _ := collectCat(&ws, dims, 0, trials) // optimizer: always active
		want := 10
		if cond {
			want = 5
		}
		if len(lrs) != want || len(cs) != 10 {
			t.Fatalf("conditions %v: %d lr_adam observations, %d optimizer ones; want %d and 10", cond, len(lrs), len(cs), want)
		}
		if cond && slices.ContainsFunc(lrs, func(x float64) bool { return x < 0.5 }) {
			t.Fatalf("with the conditions, lr_adam observations %v include an sgd trial's", lrs)
		}
		xs, _ = collect(&ws, dims, 5, trials) // width2: only with adam and layers >= 2
		if cond && len(xs) != 5 || !cond && len(xs) != 10 {
			t.Fatalf("conditions %v: %d width2 observations", cond, len(xs))
		}
		for _, mv := range []bool{false, true} {
			s, _ := NewTPE(TPEMultivariate(mv), TPEStartupTrials(2))
			h := History{Space: space, Direction: Minimize, Seed: 1}
			for _, tr := range trials {
				h.Trials = append(h.Trials, *tr)
			}
			p, err := s.Suggest(h, 10)
			if err != nil || len(p) != len(space) {
				t.Fatalf("conditions %v multivariate %v: suggestion %v (%v), want a full point", cond, mv, p, err)
			}
			for _, q := range space {
				checkInSpace(t, "tpe", q, p)
			}
		}
	}
}
