package frameworks

import (
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Megatron runs Megatron-LM programs, which are started by torchrun and initialise
// torch.distributed from its environment.
type Megatron struct{}

// Name returns "megatron".
func (Megatron) Name() schemas.Framework { return schemas.FrameworkMegatron }

// PortNames returns the rendezvous port.
func (Megatron) PortNames() []string { return []string{PortRendezvous} }

// Env returns the same environment as PyTorch.
func (Megatron) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	return torchEnv(g, r, ep)
}

// Outcome fails the job when any replica fails and succeeds it when all have.
func (Megatron) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}
