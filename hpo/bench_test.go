package hpo

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// benchSpace has n parameters: all continuous floats in [0, 1], or (mixed) a rotation of
// float, log-float, quantised float, int and categorical parameters.
func benchSpace(n int, mixed bool) Space {
	var s Space
	for i := range n {
		p := Param{Name: fmt.Sprintf("p%02d", i), Type: Float, Min: 0, Max: 1}
		if mixed {
			switch i % 5 {
			case 1:
				p = Param{Name: p.Name, Type: Float, Min: 1e-5, Max: 1, Log: true}
			case 2:
				p.Step = 0.05
			case 3:
				p = Param{Name: p.Name, Type: Int, Min: 1, Max: 256, Log: true}
			case 4:
				p = Param{Name: p.Name, Type: Categorical, Values: []string{"a", "b", "c", "d"}}
			}
		}
		s = append(s, p)
	}
	return s
}

// benchHistory returns n Completed trials drawn at random, valued by a sphere function
// of the parameters' positions in their ranges.
func benchHistory(b *testing.B, space Space, n int) History {
	h := History{Space: space, Direction: Minimize, Seed: 7}
	rs, _ := NewRandom()
	for id := range n {
		p, err := rs.Suggest(h, id)
		if err != nil {
			b.Fatal(err)
		}
		v := 0.0
		for _, q := range space {
			x := p[q.Name]
			switch {
			case q.Type == Categorical:
				x /= float64(len(q.Values))
			case q.Log:
				x = math.Log(x/q.Min) / math.Log(q.Max/q.Min)
			default:
				x = (x - q.Min) / (q.Max - q.Min)
			}
			v += (x - 0.3) * (x - 0.3)
		}
		h.Trials = append(h.Trials, Trial{ID: id, Params: p, State: TrialCompleted, Value: &v})
	}
	return h
}

// BenchmarkSuggest times one suggestion at 100 and 1,000 completed trials with 1 and 16
// parameters (all floats, or a mix of every kind). Every sub-benchmark reports ms/op
// (wall), cpu-ms/op (process CPU time, steadier on a shared machine; it includes the
// garbage collector's) and x_random, its wall time over the random sampler's on the same
// history, measured in the same run.
func BenchmarkSuggest(b *testing.B) {
	tpe, _ := NewTPE()
	mv, _ := NewTPE(TPEMultivariate(true))
	rnd, _ := NewRandom()
	for _, trials := range []int{100, 1000} {
		for _, params := range []int{1, 16} {
			for _, mixed := range []bool{false, true} {
				if mixed && params == 1 {
					continue
				}
				kind := "float"
				if mixed {
					kind = "mixed"
				}
				space := benchSpace(params, mixed)
				for _, sc := range []struct {
					name string
					s    Sampler
				}{{"Random", rnd}, {"TPE", tpe}, {"TPEMultivariate", mv}} {
					name := fmt.Sprintf("%s/trials=%d/params=%d/%s", sc.name, trials, params, kind)
					b.Run(name, func(b *testing.B) {
						h := benchHistory(b, space, trials)
						base := perOp(func(id int) { _, _ = rnd.Suggest(h, id) })
						b.ReportAllocs()
						cpu0, cpuOK := cpuTime()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							if _, err := sc.s.Suggest(h, trials+i); err != nil {
								b.Fatal(err)
							}
						}
						b.StopTimer()
						per := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(per*1e3, "ms/op")
						b.ReportMetric(per/base, "x_random")
						if cpu1, ok := cpuTime(); ok && cpuOK {
							b.ReportMetric((cpu1-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
						}
					})
				}
			}
		}
	}
}

// perOp returns the seconds one call of f takes, over at least 20 calls and 20 ms.
func perOp(f func(id int)) float64 {
	start := time.Now()
	n := 0
	for n < 20 || time.Since(start) < 20*time.Millisecond {
		f(n)
		n++
	}
	return time.Since(start).Seconds() / float64(n)
}

// BenchmarkSuggestNewSamplers times one suggestion of CMA-ES, GP, BOHB and NSGA-II
// after 100 completed trials of 16 floats or 16 mixed parameters, like BenchmarkSuggest.
func BenchmarkSuggestNewSamplers(b *testing.B) {
	rnd, _ := NewRandom()
	for _, trials := range []int{100} {
		for _, mixed := range []bool{false, true} {
			kind := "float"
			if mixed {
				kind = "mixed"
			}
			space := benchSpace(16, mixed)
			for _, name := range []string{SamplerCMAES, SamplerGP, SamplerBOHB, SamplerNSGA2} {
				s, _ := New(name)
				b.Run(fmt.Sprintf("%s/trials=%d/params=16/%s", name, trials, kind), func(b *testing.B) {
					h := benchHistory(b, space, trials)
					base := perOp(func(id int) { _, _ = rnd.Suggest(h, id) })
					b.ReportAllocs()
					cpu0, cpuOK := cpuTime()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := s.Suggest(h, trials+i); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					per := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(per*1e3, "ms/op")
					b.ReportMetric(per/base, "x_random")
					if cpu1, ok := cpuTime(); ok && cpuOK {
						b.ReportMetric((cpu1-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
					}
				})
			}
		}
	}
}
