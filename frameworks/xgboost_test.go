package frameworks

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestXGBoostEnv(t *testing.T) {
	master := gang(schemas.FrameworkXGBoost).role("worker", 2, 0).role("master", 1, 0).obj()
	workers := gang(schemas.FrameworkXGBoost).role("worker", 3, 0).obj()
	gpus := gang(schemas.FrameworkXGBoost).role("worker", 2, 4).obj()
	alone := gang(schemas.FrameworkXGBoost).role("worker", 1, 0).obj()
	// v2's DMLC_* then v1's MASTER_*, WORLD_SIZE, RANK and the LightGBM variables.
	xgb := func(tracker string, numWorker, replicas, id int, others string) []schemas.EnvVar {
		env := []schemas.EnvVar{
			{Name: "DMLC_TRACKER_URI", Value: tracker},
			{Name: "DMLC_TRACKER_PORT", Value: "29500"},
			{Name: "DMLC_NUM_WORKER", Value: itoa(numWorker)},
			{Name: "DMLC_TASK_ID", Value: itoa(id)},
			{Name: "DMLC_ROLE", Value: "worker"},
			{Name: "MASTER_ADDR", Value: tracker},
			{Name: "MASTER_PORT", Value: "29500"},
			{Name: "WORLD_SIZE", Value: itoa(replicas)},
			{Name: "RANK", Value: itoa(id)},
		}
		if others != "" {
			env = append(env, schemas.EnvVar{Name: "WORKER_ADDRS", Value: others}, schemas.EnvVar{Name: "WORKER_PORT", Value: "29500"})
		}
		return env
	}
	tests := map[string]envForCase{
		"master runs the tracker and is task 0": {
			gang: master, replica: replica(master, "master", 0), want: xgb("master-0.gang", 3, 3, 0, "worker-0.gang,worker-1.gang"),
		},
		"workers follow the master": {
			gang: master, replica: replica(master, "worker", 1), want: xgb("master-0.gang", 3, 3, 2, "worker-0.gang,worker-1.gang"),
		},
		"worker 0 runs the tracker without master": {
			gang: workers, replica: replica(workers, "worker", 2), want: xgb("worker-0.gang", 3, 3, 2, "worker-1.gang,worker-2.gang"),
		},
		"a worker per GPU (v2), a rank per replica (v1)": {
			gang: gpus, replica: replica(gpus, "worker", 1), want: xgb("worker-0.gang", 8, 2, 1, "worker-1.gang"),
		},
		"one replica: no WORKER_ADDRS": {
			gang: alone, replica: replica(alone, "worker", 0), want: xgb("worker-0.gang", 1, 1, 0, ""),
		},
	}
	testEnvFor(t, tests)
}
