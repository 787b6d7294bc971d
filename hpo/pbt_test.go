package hpo

import (
	"math"
	"reflect"
	"testing"
)

func pbtSpace() Space {
	return Space{
		{Name: "lr", Type: Float, Min: 1e-4, Max: 1, Log: true},
		{Name: "batch", Type: Categorical, Values: []string{"16", "32", "64", "128"}},
		{Name: "layers", Type: Int, Min: 1, Max: 8},
	}
}

func pbtPopulation(values ...float64) []PBTMember {
	out := make([]PBTMember, len(values))
	for m, v := range values {
		out[m] = PBTMember{Trial: 10 + m, Params: map[string]float64{"lr": 0.01 * float64(m+1), "batch": 1, "layers": 4},
			Value: new(v), Checkpoint: "s3://ck/t" + string(rune('a'+m)) + "/000000000004"}
	}
	return out
}

func TestPBTNextExploitsTheBottomQuantile(t *testing.T) {
	// Minimise: members 0 and 1 are the worst two of eight, 6 and 7 the best two.
	prev := pbtPopulation(9, 8, 5, 4, 3, 5.5, 1, 2)
	cfg := DefaultPBTConfig()
	got, err := PBTNext(pbtSpace(), Minimize, cfg, 7, 1, prev)
	if err != nil {
		t.Fatal(err)
	}
	for m, d := range got {
		switch m {
		case 0, 1:
			if d.Donor != prev[6].Trial && d.Donor != prev[7].Trial {
				t.Errorf("member %d: donor %d, want a top-quantile trial (16 or 17)", m, d.Donor)
			}
			donor := prev[d.Donor-10]
			if d.ResumeFrom != donor.Checkpoint || !reflect.DeepEqual(d.Before, donor.Params) {
				t.Errorf("member %d: resumes from %q with before %v, want the donor's %q and %v", m, d.ResumeFrom, d.Before, donor.Checkpoint, donor.Params)
			}
			if len(d.Explore) != 3 {
				t.Errorf("member %d: explore %v, want one entry per parameter", m, d.Explore)
			}
			checkExplored(t, m, d)
		default:
			if d.Donor != -1 || d.ResumeFrom != prev[m].Checkpoint || !reflect.DeepEqual(d.Params, prev[m].Params) || d.Explore != nil {
				t.Errorf("member %d: %+v, want it to carry on from its own checkpoint and params", m, d)
			}
		}
	}
	again, _ := PBTNext(pbtSpace(), Minimize, cfg, 7, 1, prev)
	if !reflect.DeepEqual(got, again) {
		t.Error("PBTNext is not a function of its arguments")
	}
	other, _ := PBTNext(pbtSpace(), Minimize, cfg, 8, 1, prev)
	if reflect.DeepEqual(got, other) {
		t.Error("another seed made the same decisions (every donor and explore alike)")
	}
	// Maximising turns the ranking round: 6 and 7 are now the worst.
	maxd, _ := PBTNext(pbtSpace(), Maximize, cfg, 7, 1, prev)
	if maxd[0].Donor != -1 || maxd[6].Donor < 0 || maxd[7].Donor < 0 {
		t.Errorf("maximize: donors %d, %d, %d; want member 0 kept and 6, 7 replaced", maxd[0].Donor, maxd[6].Donor, maxd[7].Donor)
	}
}

func checkExplored(t *testing.T, m int, d PBTDecision) {
	t.Helper()
	for name, what := range d.Explore {
		before, after := d.Before[name], d.Params[name]
		switch {
		case what == "resampled":
		case name == "batch":
			if math.Abs(after-before) > 1 {
				t.Errorf("member %d: batch moved from %v to %v (%s), want a neighbour", m, before, after, what)
			}
		case name == "lr" && what == "*1.2" && math.Abs(after-before*1.2) > 1e-12,
			name == "lr" && what == "*0.8" && math.Abs(after-before*0.8) > 1e-12:
			t.Errorf("member %d: lr %v -> %v, explore says %s", m, before, after, what)
		case name == "layers" && after != math.Round(after):
			t.Errorf("member %d: int parameter became %v", m, after)
		}
	}
}

func TestPBTQuantileSizes(t *testing.T) {
	// Ray Tune's rule: ceil(n*q) members, at most floor(n/2).
	for _, tc := range []struct {
		n    int
		q    float64
		want int
	}{{2, 0.25, 1}, {4, 0.25, 1}, {5, 0.25, 2}, {8, 0.25, 2}, {8, 0.5, 4}, {3, 0.5, 1}} {
		vals := make([]float64, tc.n)
		for i := range vals {
			vals[i] = float64(i)
		}
		top, replace := pbtQuantiles(Minimize, tc.q, pbtPopulation(vals...))
		n := 0
		for _, r := range replace {
			if r {
				n++
			}
		}
		if len(top) != tc.want || n != tc.want {
			t.Errorf("n=%d q=%v: top %d, replaced %d; want %d each", tc.n, tc.q, len(top), n, tc.want)
		}
	}
}

func TestPBTNextWithoutValueOrCheckpoint(t *testing.T) {
	prev := pbtPopulation(1, 2, 3, 4)
	prev[1].Value = nil     // a failed segment
	prev[2].Checkpoint = "" // a segment that saved nothing
	prev[3].Value = new(math.Inf(1))
	got, err := PBTNext(pbtSpace(), Minimize, DefaultPBTConfig(), 1, 2, prev)
	if err != nil {
		t.Fatal(err)
	}
	// Only member 0 is ranked: nobody can be copied.
	for m, d := range got {
		if d.Donor != -1 {
			t.Errorf("member %d copied trial %d with a single ranked member", m, d.Donor)
		}
	}
	prev[3].Value = new(0.5)
	got, _ = PBTNext(pbtSpace(), Minimize, DefaultPBTConfig(), 1, 2, prev)
	// Ranked: 3 (0.5) then 0 (1); top 1 is member 3, bottom 1 is member 0, and the
	// members without a value or checkpoint are replaced too.
	for m, want := range []int{13, 13, 13, -1} {
		if got[m].Donor != want {
			t.Errorf("member %d: donor %d, want %d", m, got[m].Donor, want)
		}
	}
}

func TestPBTConfigValidate(t *testing.T) {
	for _, c := range []PBTConfig{
		{QuantileFraction: 0, ResampleProbability: 0.2, Factors: []float64{1.2}},
		{QuantileFraction: 0.6, ResampleProbability: 0.2, Factors: []float64{1.2}},
		{QuantileFraction: 0.2, ResampleProbability: 1.2, Factors: []float64{1.2}},
		{QuantileFraction: 0.2, ResampleProbability: 0.2},
		{QuantileFraction: 0.2, ResampleProbability: 0.2, Factors: []float64{-1}},
	} {
		if _, err := PBTNext(pbtSpace(), Minimize, c, 1, 1, pbtPopulation(1, 2)); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func TestPBTInitialIsRandomSearch(t *testing.T) {
	dims, _ := newDims(pbtSpace())
	for m := range 4 {
		got, err := PBTInitial(pbtSpace(), 5, m)
		if err != nil || !reflect.DeepEqual(got, randomSuggest(dims, 5, m)) {
			t.Errorf("member %d: %v (%v), want the random sampler's trial %d", m, got, err, m)
		}
	}
}
