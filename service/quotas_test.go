package service

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
)

// Quota limits past what the quota workflow counts exactly in an int64 are refused,
// naming the field (Quantity.MilliValue of "1e400" is 0, which would have been a
// quota of nothing).
func TestQuotaLimitsBounded(t *testing.T) {
	big := int64(1<<40 + 1)
	l, errs := quotaLimits(api.Quota{GPU: &big, CPU: "1e400", Memory: "2Ei"})
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field+": "+e.Detail)
	}
	want := []string{"gpu: must be at most 1099511627776", "cpu: must be at most 1G", "memory: must be at most 1Ei"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if l.MilliCPU != nil || l.MemoryBytes != nil {
		t.Errorf("limits kept from refused values: %+v", l)
	}
	l, errs = quotaLimits(api.Quota{CPU: "1G", Memory: "1Ei"})
	if len(errs) != 0 || *l.MilliCPU != 1e12 || *l.MemoryBytes != 1<<60 {
		t.Errorf("limits at the bounds: %+v, %v", l, errs)
	}
}
