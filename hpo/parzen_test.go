package hpo

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// naiveLogSumExp adds every term, skipping none.
func naiveLogSumExp(ts []float64) float64 {
	m := math.Inf(-1)
	for _, t := range ts {
		m = math.Max(m, t)
	}
	s := 0.0
	for _, t := range ts {
		s += math.Exp(t - m)
	}
	return m + math.Log(s)
}

// TestDensitiesMatchTheFullSums checks that skipping negligible kernels changes neither
// the univariate densities and masses nor the multivariate joint density beyond 1e-9.
func TestDensitiesMatchTheFullSums(t *testing.T) {
	h := mixedHistory(t, 11, 600)
	dims, err := newDims(h.Space)
	if err != nil {
		t.Fatal(err)
	}
	var trials []*Trial
	for i := range h.Trials {
		trials = append(trials, &h.Trials[i])
	}
	r := newRNG(1, 2, 3)
	var ws tpeWork
	checked := 0
	for i := range dims {
		d := &dims[i]
		if d.cat {
			continue
		}
		xs, w := collect(&ws, dims, i, trials)
		var e parzen
		e.build(xs, w, d.lo, d.hi, 1, false)
		for k := range 50 {
			x := e.sample(r)
			if k%5 == 0 {
				x = d.lo + r.float64()*(d.hi-d.lo) // also points far from the data
			}
			var got, want float64
			var terms []float64
			if d.q > 0 {
				a, b := d.bin(d.index(d.value(x)))
				got = e.logMass(a, b)
				for j := range e.mu {
					terms = append(terms, e.logwz[j]+logNormMass((a-e.mu[j])/e.sigma[j], (b-e.mu[j])/e.sigma[j]))
				}
				want = naiveLogSumExp(terms)
			} else {
				got = e.logPDF(x)
				for j := range e.mu {
					z := (x - e.mu[j]) / e.sigma[j]
					terms = append(terms, e.logc[j]-0.5*z*z)
				}
				want = naiveLogSumExp(terms) + halfLog2Pi
			}
			if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("%s at %v: pruned %v, full %v", d.p.Name, x, got, want)
			}
			checked++
		}
	}
	mv := newMVParzen(dims, trials, 1, false)
	p := newMVPoint(len(dims))
	for range 50 {
		mv.sample(r, p)
		got := mv.logDensity(p)
		var terms []float64
		D := len(dims)
		for j := 0; j < mv.m; j++ {
			tj := mv.logw[j]
			for d := range dims {
				i := j*D + d
				switch {
				case dims[d].cat:
					if mv.mu[i] < 0 || mv.mu[i] == p.x[d] {
						tj += mv.logc[i]
					} else {
						tj += mv.logo[i]
					}
				case dims[d].q > 0:
					tj += mv.logo[i] + logNormMass((p.a[d]-mv.mu[i])/mv.sig[i], (p.b[d]-mv.mu[i])/mv.sig[i])
				default:
					z := (p.x[d] - mv.mu[i]) / mv.sig[i]
					tj += mv.logc[i] - 0.5*z*z
				}
			}
			terms = append(terms, tj)
		}
		if want := naiveLogSumExp(terms); math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("multivariate at %v: pruned %v, full %v", p.v, got, want)
		}
		checked++
	}
	if checked < 300 {
		t.Fatalf("checked only %d points", checked)
	}
}

func TestLogNormMassTails(t *testing.T) {
	tests := map[string]struct {
		a, b, want float64
	}{
		"whole line":        {a: math.Inf(-1), b: math.Inf(1), want: 0},
		"half":              {a: 0, b: math.Inf(1), want: math.Log(0.5)},
		"symmetric 1 sigma": {a: -1, b: 1, want: math.Log(0.6826894921370859)},
		"far right tail":    {a: 30, b: 31, want: math.Log(0.5*math.Erfc(30/math.Sqrt2) - 0.5*math.Erfc(31/math.Sqrt2))},
		"far left tail":     {a: -31, b: -30, want: math.Log(0.5*math.Erfc(30/math.Sqrt2) - 0.5*math.Erfc(31/math.Sqrt2))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := logNormMass(tc.a, tc.b); math.Abs(got-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
				t.Errorf("logNormMass(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
	// Beyond where erfc underflows the result stays finite and decreasing.
	prev := logNormMass(38, 39)
	for _, a := range []float64{40, 60, 100} {
		got := logNormMass(a, a+1)
		if math.IsInf(got, 0) || math.IsNaN(got) || got >= prev {
			t.Errorf("logNormMass(%v, %v) = %v, want finite and below %v", a, a+1, got, prev)
		}
		prev = got
	}
}

// TestUnscaledKernelsMatchOptuna31: with unscaled kernels, the log density of the good
// set of a Rosenbrock-10 history (6 observations of x00 on [-5, 10] and the prior) differs
// between points exactly as Optuna 3.1's _ParzenEstimator.log_pdf does on the same
// observations (values printed by Debian's python3-optuna 3.1.0; its truncnorm.logpdf
// leaves out log σ); with the densities, it does not.
func TestUnscaledKernelsMatchOptuna31(t *testing.T) {
	obs := []float64{-3.882153473036273, 2.908694674021593, -0.9596288222777609, 4.7026551564920105, 2.618771365847566, 1.317181456922916}
	at := []float64{-4, 0, 2.5, 9}
	optuna := []float64{-1.334241708641706, -1.1042694845717964, -0.9704423369303763, -1.9627101321422562}
	w := []float64{1, 1, 1, 1, 1, 1}
	for _, unscaled := range []bool{true, false} {
		var e parzen
		e.build(obs, w, -5, 10, 1, unscaled)
		base := e.logPDF(at[0])
		worst := 0.0
		for i, x := range at {
			worst = math.Max(worst, math.Abs((e.logPDF(x)-base)-(optuna[i]-optuna[0])))
		}
		if unscaled && worst > 1e-9 {
			t.Errorf("unscaled: log density differences are %.3g away from Optuna 3.1's", worst)
		}
		if !unscaled && worst < 0.1 {
			t.Errorf("densities: log density differences within %.3g of Optuna 3.1's, want them apart", worst)
		}
	}
}

// TestTPEKernelScores: by default TPE, univariate and multivariate, scores with
// unscaled kernels, the same as asking for them; the two kinds of scores suggest
// differently.
func TestTPEKernelScores(t *testing.T) {
	space := rosenbrockSpace(4)
	h := History{Space: space, Direction: Minimize, Seed: 9}
	rs, _ := NewRandom()
	for id := range 40 {
		p, _ := rs.Suggest(h, id)
		v := rosenbrockOf(map[string]float64{"x00": p["x00"], "x01": p["x01"]})
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	suggest := func(opts ...Option) string {
		s, err := NewTPE(opts...)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for id := 40; id < 45; id++ {
			p, err := s.Suggest(h, id)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(&out, p)
		}
		return out.String()
	}
	for _, mv := range []bool{false, true} {
		auto := suggest(TPEMultivariate(mv))
		dens := suggest(TPEMultivariate(mv), TPEKernelScores(TPEScoresDensity))
		unscaled := suggest(TPEMultivariate(mv), TPEKernelScores(TPEScoresUnscaled))
		if auto != unscaled {
			t.Errorf("multivariate %v: the default suggests otherwise than its documented scores", mv)
		}
		if dens == unscaled {
			t.Errorf("multivariate %v: densities and unscaled kernels suggest the same", mv)
		}
	}
	if _, err := NewTPE(TPEKernelScores(TPEScores(7))); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("unknown scores: error %v, want ErrInvalidOption", err)
	}
}
