package frameworks

import (
	"encoding/json"
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// TensorFlow gives each replica the TF_CONFIG that tf.distribute's
// TFConfigClusterResolver reads: the cluster (role → host:port in index order), the
// replica's own task, and "environment": "cloud", as Kubeflow's TFJob writes it.
//
// Every role is in the cluster, the evaluator too, as current Kubeflow TFJobs have it
// (TFConfigClusterResolver.master() looks the task up in the cluster, and tf.distribute
// accepts an evaluator there). A role "master" is the chief under another name, as in
// TFJob (whose Master and Chief are one replica type, at most one of them per job, as
// validation requires here too): it is written "chief", since tf.distribute refuses any
// other task type than chief, worker, ps and evaluator, and it decides the job's outcome
// as the chief does. A gang that has both anyway keeps "master" as written.
//
// Each replica's server listens on the rendezvous port. Where the backend puts several
// replicas on one address (the local backend: all on 127.0.0.1), replica k in RankOrder
// uses rendezvous port + k instead; only the rendezvous port itself is reserved by the
// backend, so the others may in rare cases be taken.
type TensorFlow struct{ rendezvousPorts }

// Name returns "tensorflow".
func (TensorFlow) Name() schemas.Framework { return schemas.FrameworkTensorFlow }

// TensorFlow's task types that OpenDLC treats specially.
const (
	tfChief  = "chief"
	tfMaster = "master"
)

type tfConfig struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        tfTask              `json:"task"`
	Environment string              `json:"environment"`
}

type tfTask struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// Env returns TF_CONFIG.
func (TensorFlow) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	order := RankOrder(g)
	port := ep.Port(PortRendezvous)
	hosts := map[string]bool{}
	roles := map[string]bool{}
	for _, x := range order {
		hosts[ep.Host(x.Role, x.Index)] = true
		roles[x.Role] = true
	}
	taskType := func(role string) string {
		if role == tfMaster && !roles[tfChief] {
			return tfChief
		}
		return role
	}
	shared := len(hosts) < len(order)
	cluster := map[string][]string{}
	for rank, x := range order {
		p := port
		if shared {
			p += rank
		}
		t := taskType(x.Role)
		cluster[t] = append(cluster[t], ep.Host(x.Role, x.Index)+":"+strconv.Itoa(p))
	}
	// Marshal sorts the map's keys, so the JSON is the same for every replica order; it
	// cannot fail on strings and ints.
	b, _ := json.Marshal(tfConfig{Cluster: cluster, Task: tfTask{Type: taskType(r.Role), Index: r.Index}, Environment: "cloud"})
	return []schemas.EnvVar{{Name: "TF_CONFIG", Value: string(b)}}
}

// Outcome lets the chief (or the master, its alias) decide: the job succeeds when the
// chief does, even if workers still run. Without either, worker 0 decides. Any failed replica fails the job, as in
// Kubeflow's TFJob, because TensorFlow's cluster does not survive a lost member. Parameter
// servers never finish by themselves; they are stopped when the job ends.
func (TensorFlow) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	switch {
	case hasRole(replicas, tfChief):
		return leaderDecides(replicas, tfChief, 0, true)
	case hasRole(replicas, tfMaster):
		return leaderDecides(replicas, tfMaster, 0, true)
	case hasRole(replicas, "worker"):
		return leaderDecides(replicas, "worker", 0, true)
	}
	// Neither chief nor worker: every replica but the parameter servers must succeed.
	var rest []schemas.ReplicaStatus
	for _, r := range replicas {
		if r.Role != "ps" {
			rest = append(rest, r)
		}
	}
	if f := firstFailure(replicas); f != nil {
		return schemas.JobFailed, f.Name
	}
	return allSucceed(rest)
}
