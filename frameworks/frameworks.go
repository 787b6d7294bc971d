// Package frameworks turns a gang into each framework's rendezvous environment: the
// variables (MASTER_ADDR, RANK, TF_CONFIG, hostfiles...) that let the replicas of one
// attempt find each other. Backends supply the addresses through Endpoints, because only
// they know where replicas run (a pod's DNS name, 127.0.0.1 for local processes); this
// package supplies the rules, so every backend gives training code the same contract.
package frameworks

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// PortRendezvous is the named port on which rank 0 serves the rendezvous (torch's
// TCPStore for MASTER_PORT).
const PortRendezvous = "rendezvous"

// ErrUnknownFramework is returned for a framework that has no registered rendezvous
// rules.
var ErrUnknownFramework = errors.New("frameworks: unknown framework")

// ErrReplicaNotInGang is returned by EnvFor when the replica is not one of the gang's.
var ErrReplicaNotInGang = errors.New("frameworks: replica is not in the gang")

// Endpoints tells a framework where the gang's replicas can be reached. The backend
// implements it.
type Endpoints interface {
	// Host is the address other replicas use to reach the replica role/index.
	Host(role string, index int) string
	// Port is the gang's port with the given name (one of the framework's PortNames);
	// 0 when the backend did not allocate it.
	Port(name string) int
}

// Framework is one framework's rendezvous rules.
type Framework interface {
	// Name is the framework as written in a job spec.
	Name() schemas.Framework
	// PortNames lists the named ports the backend must allocate per gang before calling
	// Env, in a stable order. Nil when the framework needs none.
	PortNames() []string
	// Env returns the rendezvous environment of replica r of gang g, in a stable order.
	// r must be one of g's replicas; EnvFor checks that.
	Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar
	// Outcome applies the framework's success rule to a snapshot of the replicas of one
	// attempt (see the package function Outcome).
	Outcome(replicas []schemas.ReplicaStatus) (phase schemas.JobPhase, decidedBy string)
}

// registered lists every framework with rendezvous rules. A fixed list rather than
// init-time registration, so what is supported is visible in one place and the package
// holds no mutable global state.
var registered = []Framework{
	PyTorch{},
	DeepSpeed{},
	Megatron{},
	TensorFlow{},
	MPI{},
	XGBoost{},
	Paddle{},
	Ray{},
	Slurm{},
	Preprocess{},
	Inference{},
	Custom{},
}

// Get returns the rules of framework f, or an error wrapping ErrUnknownFramework.
func Get(f schemas.Framework) (Framework, error) {
	for _, fw := range registered {
		if fw.Name() == f {
			return fw, nil
		}
	}
	return nil, fmt.Errorf("%w %q (supported: %v)", ErrUnknownFramework, f, Supported())
}

// Supported lists the frameworks that have rendezvous rules, in schemas.Frameworks order,
// so callers (validation, docs) can tell users what runs today.
func Supported() []schemas.Framework {
	var out []schemas.Framework
	for _, f := range schemas.Frameworks {
		for _, fw := range registered {
			if fw.Name() == f {
				out = append(out, f)
			}
		}
	}
	return out
}

// EnvFor returns the rendezvous environment of replica r of gang g under g's framework.
// It fails for an unknown framework, a replica that is not in the gang, or a port the
// framework needs that ep does not provide.
func EnvFor(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) ([]schemas.EnvVar, error) {
	fw, err := Get(g.Framework)
	if err != nil {
		return nil, err
	}
	if rankOf(g, r) < 0 {
		return nil, fmt.Errorf("%w: %s-%d in gang %s", ErrReplicaNotInGang, r.Role, r.Index, g.ID())
	}
	for _, name := range fw.PortNames() {
		if ep.Port(name) <= 0 {
			return nil, fmt.Errorf("frameworks: %s needs port %q, which the backend did not allocate", fw.Name(), name)
		}
	}
	return append(fw.Env(g, r, ep), commonEnv(r)...), nil
}

// commonEnv is what every replica gets whatever its framework, unless its own
// environment (the job's env or its role's) sets the name: PYTHONUNBUFFERED=1, as
// Kubeflow's PyTorchJob and XGBoostJob set it, so Python output reaches the logs as it
// is written; and NPROC_PER_NODE, the processes the replica's node runs (its GPUs, or
// 1), as PAI-DLC sets it.
func commonEnv(r backend.ReplicaSpec) []schemas.EnvVar {
	return unlessSet(r,
		schemas.EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"},
		schemas.EnvVar{Name: "NPROC_PER_NODE", Value: strconv.Itoa(slots(r))},
	)
}

// unlessSet returns the defaults, in order, less those whose name the replica's own
// environment (the job's env or its role's) sets: the job's value wins.
func unlessSet(r backend.ReplicaSpec, defaults ...schemas.EnvVar) []schemas.EnvVar {
	var out []schemas.EnvVar
	for _, e := range defaults {
		if !slices.ContainsFunc(r.Env, func(x schemas.EnvVar) bool { return x.Name == e.Name }) {
			out = append(out, e)
		}
	}
	return out
}

// DefaultPort is the port a framework's named port has by convention (Ray's GCS on
// 6379, PaddleJob's rendezvous on 36543), for backends that can give every gang the
// same numbers (Kubernetes: a pod has its own IP); 0 when the name has no conventional
// number.
func DefaultPort(name string) int {
	switch name {
	case PortRayGCS:
		return DefaultRayGCSPort
	case PortPaddleMaster:
		return DefaultPaddlePort
	}
	return 0
}

// RankOrder returns the gang's replicas in global rank order: the leader role first (see
// LeaderRole), then the other roles by name, each role's replicas by index. Every
// framework ranks replicas this way, so RANK 0 is always the replica at MASTER_ADDR.
func RankOrder(g backend.GangSpec) []backend.ReplicaSpec {
	leader := LeaderRole(g)
	out := append([]backend.ReplicaSpec(nil), g.Replicas...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Role == leader) != (b.Role == leader) {
			return a.Role == leader
		}
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Index < b.Index
	})
	return out
}

// LeaderRole is the role whose replica 0 hosts the rendezvous: "master" if the gang has
// one, else "worker", else the first role by name; "" for an empty gang.
func LeaderRole(g backend.GangSpec) string {
	first := ""
	hasWorker := false
	for _, r := range g.Replicas {
		switch {
		case r.Role == "master":
			return r.Role
		case r.Role == "worker":
			hasWorker = true
		}
		if first == "" || r.Role < first {
			first = r.Role
		}
	}
	if hasWorker {
		return "worker"
	}
	return first
}

// rankOf returns r's global rank in g, or -1 when r is not in g.
func rankOf(g backend.GangSpec, r backend.ReplicaSpec) int {
	for i, x := range RankOrder(g) {
		if x.Role == r.Role && x.Index == r.Index {
			return i
		}
	}
	return -1
}

// roleReplicas returns the gang's replicas of role, by index.
func roleReplicas(g backend.GangSpec, role string) []backend.ReplicaSpec {
	var out []backend.ReplicaSpec
	for _, r := range g.Replicas {
		if r.Role == role {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// slots is how many processes a replica runs: one per GPU, or one without GPUs.
func slots(r backend.ReplicaSpec) int {
	if r.Resources.GPU > 0 {
		return int(r.Resources.GPU)
	}
	return 1
}
