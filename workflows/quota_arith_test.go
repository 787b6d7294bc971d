package workflows

import (
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/schemas"
)

// Finding 5 of issue 33: "1e400" CPU and memory counted as 0 and
// "9223372036854775807" CPU as -1 CPU, so all three fitted a 2-CPU quota. What a job
// counts now saturates instead, and no such job fits a quota.
func TestJobDemandSaturates(t *testing.T) {
	job := func(replicas int32, cpu, memory string) *schemas.TrainingJob {
		r := schemas.RoleSpec{Replicas: replicas}
		if cpu != "" {
			r.Resources.CPU = new(resource.MustParse(cpu))
		}
		if memory != "" {
			r.Resources.Memory = new(resource.MustParse(memory))
		}
		return &schemas.TrainingJob{Spec: schemas.TrainingJobSpec{Roles: map[string]schemas.RoleSpec{"worker": r}}}
	}
	twoCPUs := QuotaLimits{MilliCPU: new(int64(2000)), MemoryBytes: new(int64(1 << 40))}
	for name, tc := range map[string]struct {
		job  *schemas.TrainingJob
		want Amounts
	}{
		"cpu 1e400":                  {job(1, "1e400", ""), Amounts{MilliCPU: math.MaxInt64}},
		"memory 1e400":               {job(1, "", "1e400"), Amounts{MemoryBytes: math.MaxInt64}},
		"cpu 9223372036854775807":    {job(1, "9223372036854775807", ""), Amounts{MilliCPU: math.MaxInt64}},
		"cpu just past int64 milli":  {job(1, "9223372036854776", ""), Amounts{MilliCPU: math.MaxInt64}},
		"replicas times a large cpu": {job(1024, "9223372036854775", ""), Amounts{MilliCPU: math.MaxInt64}},
		"memory 100Ei":               {job(2, "", "100Ei"), Amounts{MemoryBytes: math.MaxInt64}},
		"ordinary":                   {job(4, "500m", "1Gi"), Amounts{MilliCPU: 2000, MemoryBytes: 4 << 30}},
		"largest valid job":          {job(1024, "4096", "64Ti"), Amounts{MilliCPU: 1024 * 4096 * 1000, MemoryBytes: 1024 << 46}},
	} {
		t.Run(name, func(t *testing.T) {
			got := jobDemand(tc.job)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("demand %+v, want %+v", got, tc.want)
			}
			l := &ledger{members: []*QuotaMember{{Workspace: "ws", Limits: twoCPUs}}}
			fits, _ := l.fits(l.members[0], vecOf(got), nil, "")
			if wantFits := name == "ordinary"; fits != wantFits {
				t.Errorf("fits a 2-CPU, 1 TiB quota: %v, want %v", fits, wantFits)
			}
		})
	}
}

// The quota's use never wraps around nor goes negative: a saturated share added to
// others and released again leaves the others' use.
func TestQuotaUseSaturates(t *testing.T) {
	m := &QuotaMember{Workspace: "ws"}
	q := &quotaWorkflow{state: QuotaView{Workspace: "ws"}, members: []*QuotaMember{m}}
	huge := Amounts{MilliCPU: math.MaxInt64, MemoryBytes: math.MaxInt64, GPU: math.MaxInt64}
	small := Amounts{MilliCPU: 1000, MemoryBytes: 1 << 30, GPU: 1}
	m.Admitted = []QuotaEntry{{JobID: "small", Resources: small}, {JobID: "huge", Resources: huge}}
	m.recount()
	if !reflect.DeepEqual(m.Used, huge) {
		t.Fatalf("use with a saturated share %+v, want %+v", m.Used, huge)
	}
	m.Limits = QuotaLimits{MilliCPU: new(int64(math.MaxInt64 - 1))}
	if ok, _ := q.ledger().fits(m, vecOf(small), nil, ""); ok {
		t.Error("a request on top of a saturated use fits a limit below math.MaxInt64")
	}
	q.release("huge")
	if !reflect.DeepEqual(m.Used, small) {
		t.Errorf("use after the saturated share is released %+v, want %+v", m.Used, small)
	}
	q.release("small")
	q.release("small")
	if !reflect.DeepEqual(m.Used, Amounts{}) {
		t.Errorf("use after every release %+v, want nothing", m.Used)
	}
	if got := (Amounts{MilliCPU: 5}).Sub(Amounts{MilliCPU: 7}); got.MilliCPU != 0 {
		t.Errorf("5m less 7m: %dm, want 0", got.MilliCPU)
	}
}
