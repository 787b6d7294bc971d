package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// XGBoost is XGBoost's collective (formerly Rabit) with a tracker on rank 0: the master
// if the job has one, else worker 0. Every replica, the master included, is one
// collective worker, as in Kubeflow's XGBoostJob. Rank 0 starts the tracker on
// DLC_TRACKER_PORT before joining, e.g. with xgboost.tracker.RabitTracker(host_ip="0.0.0.0",
// n_workers=int(os.environ["DMLC_NUM_WORKER"]), port=int(os.environ["DMLC_TRACKER_PORT"])),
// and every replica joins with xgboost.collective.CommunicatorContext built from the
// DMLC_* variables (which older Rabit reads from the environment directly).
type XGBoost struct{}

// Name returns "xgboost".
func (XGBoost) Name() schemas.Framework { return schemas.FrameworkXGBoost }

// PortNames returns the rendezvous port, on which rank 0 runs the tracker.
func (XGBoost) PortNames() []string { return []string{PortRendezvous} }

// Env returns DMLC_TRACKER_URI (rank 0's host), DMLC_TRACKER_PORT, DMLC_NUM_WORKER (every
// replica), DMLC_TASK_ID (the replica's rank) and DMLC_ROLE=worker.
func (XGBoost) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	order := RankOrder(g)
	tracker := ""
	if len(order) > 0 {
		tracker = ep.Host(order[0].Role, order[0].Index)
	}
	return []schemas.EnvVar{
		{Name: "DMLC_TRACKER_URI", Value: tracker},
		{Name: "DMLC_TRACKER_PORT", Value: strconv.Itoa(ep.Port(PortRendezvous))},
		{Name: "DMLC_NUM_WORKER", Value: strconv.Itoa(len(order))},
		{Name: "DMLC_TASK_ID", Value: strconv.Itoa(rankOf(g, r))},
		{Name: "DMLC_ROLE", Value: "worker"},
	}
}

// Outcome fails the job when any replica fails and succeeds it when all have: every
// replica is a worker of the same collective.
func (XGBoost) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}
