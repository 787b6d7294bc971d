package frameworks

import (
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// The types below hold the rules several frameworks share. A framework embeds the ones
// it follows and writes only the methods where it differs.

// rendezvousPorts is embedded by the frameworks whose rank 0 (or every replica) serves
// on the gang's rendezvous port.
type rendezvousPorts struct{}

// PortNames returns the rendezvous port.
func (rendezvousPorts) PortNames() []string { return []string{PortRendezvous} }

// noPorts is embedded by the frameworks whose replicas need no port from the backend.
type noPorts struct{}

// PortNames returns nil: the backend allocates no port for the gang.
func (noPorts) PortNames() []string { return nil }

// allSucceedRule is embedded by the frameworks where every replica counts alike.
type allSucceedRule struct{}

// Outcome fails the job when any replica fails and succeeds it when all have.
func (allSucceedRule) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}

// torchRendezvous is torch.distributed's static rendezvous (see PyTorch), embedded by
// every framework built on it.
type torchRendezvous struct {
	rendezvousPorts
	allSucceedRule
}

// Env returns MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK, LOCAL_RANK,
// LOCAL_WORLD_SIZE, their PET_* twins and PAI-DLC's KUBERNETES_CONTAINER_RESOURCE_GPU.
func (torchRendezvous) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	return torchEnv(g, r, ep)
}

// shards is embedded by the frameworks that run N independent shards (see Preprocess):
// no ports, DLC_SHARD_INDEX, DLC_SHARD_COUNT and JOB_COMPLETION_INDEX, and success when
// every shard succeeds.
type shards struct {
	noPorts
	allSucceedRule
}

// Env returns DLC_SHARD_INDEX, DLC_SHARD_COUNT and JOB_COMPLETION_INDEX.
func (shards) Env(g backend.GangSpec, r backend.ReplicaSpec, _ Endpoints) []schemas.EnvVar {
	return shardEnv(g, r)
}
