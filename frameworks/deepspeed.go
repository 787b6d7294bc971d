package frameworks

import (
	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// DeepSpeed runs DeepSpeed programs under torch.distributed's rendezvous (the way the
// deepspeed launcher's --no_ssh mode and torchrun both start them). A hostfile for the
// ssh-based launcher is not provided yet.
type DeepSpeed struct{}

// Name returns "deepspeed".
func (DeepSpeed) Name() schemas.Framework { return schemas.FrameworkDeepSpeed }

// PortNames returns the rendezvous port.
func (DeepSpeed) PortNames() []string { return []string{PortRendezvous} }

// Env returns the same environment as PyTorch.
func (DeepSpeed) Env(g activities.GangSpec, r activities.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	return torchEnv(g, r, ep)
}

// Outcome fails the job when any replica fails and succeeds it when all have.
func (DeepSpeed) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}
