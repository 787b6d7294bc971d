package kube

import (
	"encoding/json"
	"testing"
	"time"
)

// A kubelet summary as /stats/summary serves it: the replica's container is read only
// while it has a working set; the same container listed after its end (CPU time frozen,
// working set 0) or before its first reading is no sample.
func TestSummaryContainerNeedsAWorkingSet(t *testing.T) {
	const doc = `{"pods": [
	  {"podRef": {"name": "job-worker-0", "namespace": "team"}, "containers": [
	    {"name": "sidecar", "cpu": {"time": "2026-12-07T10:00:00Z", "usageCoreNanoSeconds": 1}, "memory": {"workingSetBytes": 1}},
	    {"name": "trainer", "cpu": {"time": "2026-12-07T10:00:02Z", "usageCoreNanoSeconds": 2500000000}, "memory": {"workingSetBytes": 157286400}}]},
	  {"podRef": {"name": "ended-worker-0", "namespace": "team"}, "containers": [
	    {"name": "trainer", "cpu": {"time": "2026-12-07T10:00:04Z", "usageCoreNanoSeconds": 2500000000}, "memory": {"workingSetBytes": 0}}]},
	  {"podRef": {"name": "new-worker-0", "namespace": "team"}, "containers": [
	    {"name": "trainer", "cpu": {"time": "2026-12-07T10:00:04Z", "usageCoreNanoSeconds": 1000}}]}
	]}`
	var sum statsSummary
	if err := json.Unmarshal([]byte(doc), &sum); err != nil {
		t.Fatal(err)
	}
	at, cpu, mem, ok := sum.container("team", "job-worker-0", "trainer")
	if !ok || !at.Equal(time.Date(2026, 12, 7, 10, 0, 2, 0, time.UTC)) || cpu != 2.5 || mem != 150<<20 {
		t.Errorf("running container: %v %v %v %v", at, cpu, mem, ok)
	}
	for _, pod := range []string{"ended-worker-0", "new-worker-0", "missing-worker-0"} {
		if _, _, _, ok := sum.container("team", pod, "trainer"); ok {
			t.Errorf("%s: read as a sample", pod)
		}
	}
	if _, _, _, ok := sum.container("other", "job-worker-0", "trainer"); ok {
		t.Error("a pod of another namespace was read")
	}
}
