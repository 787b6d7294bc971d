package frameworks

import (
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// XGBoost is XGBoost's collective (formerly Rabit) with a tracker on rank 0: the master
// if the job has one, else worker 0. Every replica, the master included, is a worker of
// the collective, as in Kubeflow's XGBoostJob. Rank 0 starts the tracker on the
// rendezvous port before joining, e.g. with xgboost.tracker.RabitTracker(host_ip="0.0.0.0",
// n_workers=int(os.environ["DMLC_NUM_WORKER"]), port=int(os.environ["DMLC_TRACKER_PORT"])),
// and every replica joins with xgboost.collective.CommunicatorContext built from the
// DMLC_* variables.
//
// Both generations of Kubeflow's conventions are set; their names do not collide:
//
//   - Kubeflow Trainer v2 (its XGBoost plugin): DMLC_TRACKER_URI, DMLC_TRACKER_PORT,
//     DMLC_TASK_ID (the replica's index in rank order, v2's pod index) and
//     DMLC_NUM_WORKER, which counts a worker per GPU (or one per replica without GPUs),
//     since XGBoost runs one worker process per GPU. A replica with N GPUs that runs N
//     processes gives them their own task ids; with the same GPUs everywhere,
//     DMLC_TASK_ID*N + the process's GPU index.
//   - training-operator v1 (XGBoostJob): MASTER_ADDR and MASTER_PORT (the tracker),
//     WORLD_SIZE (the replicas), RANK (= DMLC_TASK_ID) and, with more than one replica,
//     WORKER_ADDRS (every other replica's host, in rank order) and WORKER_PORT, which
//     LightGBM jobs read.
//
// DMLC_ROLE=worker is kept for the dmlc-core trackers that read it.
// Every replica is a worker of the same collective, so the job succeeds when all have
// (allSucceedRule).
type XGBoost struct {
	rendezvousPorts
	allSucceedRule
}

// Name returns "xgboost".
func (XGBoost) Name() schemas.Framework { return schemas.FrameworkXGBoost }

// Env returns the DMLC_* variables, then training-operator v1's.
func (XGBoost) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	order := RankOrder(g)
	tracker := ""
	if len(order) > 0 {
		tracker = ep.Host(order[0].Role, order[0].Index)
	}
	workers := 0
	var others []string
	for i, x := range order {
		workers += slots(x)
		if i > 0 {
			others = append(others, ep.Host(x.Role, x.Index))
		}
	}
	port, rank := strconv.Itoa(ep.Port(PortRendezvous)), strconv.Itoa(rankOf(g, r))
	env := []schemas.EnvVar{
		{Name: "DMLC_TRACKER_URI", Value: tracker},
		{Name: "DMLC_TRACKER_PORT", Value: port},
		{Name: "DMLC_NUM_WORKER", Value: strconv.Itoa(workers)},
		{Name: "DMLC_TASK_ID", Value: rank},
		{Name: "DMLC_ROLE", Value: "worker"},
		{Name: "MASTER_ADDR", Value: tracker},
		{Name: "MASTER_PORT", Value: port},
		{Name: "WORLD_SIZE", Value: strconv.Itoa(len(order))},
		{Name: "RANK", Value: rank},
	}
	if len(others) > 0 {
		env = append(env,
			schemas.EnvVar{Name: "WORKER_ADDRS", Value: strings.Join(others, ",")},
			schemas.EnvVar{Name: "WORKER_PORT", Value: port},
		)
	}
	return env
}
