package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// PortPaddleMaster names the port of PaddlePaddle's rendezvous (the HTTP store that
// paddle.distributed.launch serves on the host PADDLE_MASTER names), as Kubeflow's
// PaddleJob names its container port.
const PortPaddleMaster = "master"

// DefaultPaddlePort is PaddleJob's default port (PaddleJobDefaultPort). The Kubernetes
// backend gives PortPaddleMaster this number (see DefaultPort); the local backend, where
// every gang shares 127.0.0.1, allocates a free one.
const DefaultPaddlePort = 36543

// EnvPodIP holds the replica's own IP address, on the replica that serves Paddle's
// rendezvous: paddle.distributed.launch serves it only where PADDLE_MASTER names an
// address of the replica's own, so there PADDLE_MASTER is "$(POD_IP_DUMMY):port", as in
// PaddleJob. See SelfIP for how a backend gives it.
const EnvPodIP = "POD_IP_DUMMY"

// PodIPRef stands for the replica's own IP address in a variable's value, on a backend
// whose Endpoints implement SelfIP by returning it: a Kubernetes reference to EnvPodIP,
// which that backend defines from the pod's status.podIP, first in the container's
// environment, so that the kubelet expands it.
const PodIPRef = "$(" + EnvPodIP + ")"

// SelfIP is implemented by the Endpoints of a backend that learns a replica's IP
// address only once the replica runs (Kubernetes: a pod's IP). SelfIP returns what a
// variable holds for it (PodIPRef), which the backend resolves when the replica starts.
// Without it, Host is an address of the replica's own (local: 127.0.0.1).
type SelfIP interface {
	SelfIP() string
}

// Paddle is PaddlePaddle's launcher (python -m paddle.distributed.launch) as Kubeflow's
// PaddleJob (training-operator v1) sets it up: roles master and worker, and on every
// replica
//
//   - PADDLE_JOB_ID, the job's name, and PADDLE_NNODES, the replicas of all roles;
//   - PADDLE_MASTER, host:port of the rendezvous: master 0 when the job has masters
//     (the parameter-server mode), else worker 0 (the collective mode). That replica
//     itself gets POD_IP_DUMMY, its own IP address, and PADDLE_MASTER
//     "<its IP>:port" (see EnvPodIP); the others get its DNS name;
//   - with masters, PADDLE_SERVER_NUM=1 on each master and PADDLE_TRAINER_NUM=1 on each
//     worker: one server or trainer per replica.
//
// The rendezvous listens on PortPaddleMaster. The job succeeds when every master has,
// or every worker without masters (as PaddleJob decides); any failed replica fails it.
type Paddle struct{}

// Name returns "paddle".
func (Paddle) Name() schemas.Framework { return schemas.FrameworkPaddle }

// PortNames returns the rendezvous port, PortPaddleMaster.
func (Paddle) PortNames() []string { return []string{PortPaddleMaster} }

// PaddleJob's replica types, as roles.
const (
	paddleMaster = "master"
	paddleWorker = "worker"
)

// Env returns PADDLE_JOB_ID, PADDLE_NNODES, POD_IP_DUMMY (on the rendezvous replica),
// PADDLE_MASTER and, with masters, PADDLE_SERVER_NUM or PADDLE_TRAINER_NUM.
func (Paddle) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	port := strconv.Itoa(ep.Port(PortPaddleMaster))
	psMode := len(roleReplicas(g, paddleMaster)) > 0
	leader := paddleWorker
	if psMode {
		leader = paddleMaster
	}
	env := []schemas.EnvVar{
		{Name: "PADDLE_JOB_ID", Value: g.Job},
		{Name: "PADDLE_NNODES", Value: strconv.Itoa(len(g.Replicas))},
	}
	if r.Role == leader && r.Index == 0 {
		ip := ep.Host(r.Role, r.Index)
		if s, ok := ep.(SelfIP); ok {
			ip = s.SelfIP()
		}
		env = append(env,
			schemas.EnvVar{Name: EnvPodIP, Value: ip},
			schemas.EnvVar{Name: "PADDLE_MASTER", Value: ip + ":" + port},
		)
	} else {
		env = append(env, schemas.EnvVar{Name: "PADDLE_MASTER", Value: ep.Host(leader, 0) + ":" + port})
	}
	switch {
	case !psMode:
	case r.Role == paddleMaster:
		env = append(env, schemas.EnvVar{Name: "PADDLE_SERVER_NUM", Value: "1"})
	default:
		env = append(env, schemas.EnvVar{Name: "PADDLE_TRAINER_NUM", Value: "1"})
	}
	return env
}

// Outcome lets the masters decide when there are any: the job succeeds once every
// master has, the workers still running then being stopped; without masters, every
// worker must succeed. Any failed replica fails the job, as in PaddleJob without
// restarts.
func (Paddle) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	var masters []schemas.ReplicaStatus
	for _, r := range replicas {
		if r.Role == paddleMaster {
			masters = append(masters, r)
		}
	}
	if len(masters) == 0 {
		return allSucceed(replicas)
	}
	if f := firstFailure(replicas); f != nil {
		return schemas.JobFailed, f.Name
	}
	return allSucceed(masters)
}
