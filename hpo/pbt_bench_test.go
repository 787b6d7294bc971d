package hpo

import (
	"fmt"
	"testing"
)

// BenchmarkSuggestPBT times one PBT generation's decisions (hpo.PBTNext: rank the
// population, pick donors, explore) for populations of 16 and 64 members with 16 float
// or mixed parameters, like BenchmarkSuggest: ms/op and cpu-ms/op per generation, and
// ms/member, the share of one member's decision.
func BenchmarkSuggestPBT(b *testing.B) {
	for _, pop := range []int{16, 64} {
		for _, mixed := range []bool{false, true} {
			kind := "float"
			if mixed {
				kind = "mixed"
			}
			space := benchSpace(16, mixed)
			b.Run(fmt.Sprintf("pbt/population=%d/params=16/%s", pop, kind), func(b *testing.B) {
				h := benchHistory(b, space, pop)
				prev := make([]PBTMember, pop)
				for m, t := range h.Trials {
					prev[m] = PBTMember{Trial: t.ID, Params: t.Params, Value: t.Value, Checkpoint: fmt.Sprintf("s3://ck/t%d/000000000010", t.ID)}
				}
				cfg := DefaultPBTConfig()
				b.ReportAllocs()
				cpu0, cpuOK := cpuTime()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := PBTNext(space, Minimize, cfg, 7, 1+i, prev); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				per := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(per*1e3, "ms/op")
				b.ReportMetric(per*1e3/float64(pop), "ms/member")
				if cpu1, ok := cpuTime(); ok && cpuOK {
					b.ReportMetric((cpu1-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
				}
			})
		}
	}
}
