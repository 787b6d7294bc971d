package frameworks

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestXGBoostEnv(t *testing.T) {
	master := gang(schemas.FrameworkXGBoost).role("worker", 2, 0).role("master", 1, 0).obj()
	workers := gang(schemas.FrameworkXGBoost).role("worker", 3, 0).obj()
	dmlc := func(tracker string, n, id int) []schemas.EnvVar {
		return []schemas.EnvVar{
			{Name: "DMLC_TRACKER_URI", Value: tracker},
			{Name: "DMLC_TRACKER_PORT", Value: "29500"},
			{Name: "DMLC_NUM_WORKER", Value: itoa(n)},
			{Name: "DMLC_TASK_ID", Value: itoa(id)},
			{Name: "DMLC_ROLE", Value: "worker"},
		}
	}
	tests := map[string]envForCase{
		"master runs the tracker and is task 0": {
			gang: master, replica: replica(master, "master", 0), want: dmlc("master-0.gang", 3, 0),
		},
		"workers follow the master": {
			gang: master, replica: replica(master, "worker", 1), want: dmlc("master-0.gang", 3, 2),
		},
		"worker 0 runs the tracker without master": {
			gang: workers, replica: replica(workers, "worker", 2), want: dmlc("worker-0.gang", 3, 2),
		},
	}
	testEnvFor(t, tests)
}
