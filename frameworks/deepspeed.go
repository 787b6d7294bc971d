package frameworks

import (
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// DeepSpeed runs DeepSpeed programs under torch.distributed's rendezvous (the way the
// deepspeed launcher's --no_ssh mode and torchrun both start them), and also gives the
// hostfile the ssh-based launcher reads: DLC_HOSTFILE_CONTENT, a line "host slots=N" per
// replica in rank order (N = its GPUs, or 1). Write it out with
// printf '%s' "$DLC_HOSTFILE_CONTENT" > /job/hostfile; deepspeed --hostfile /job/hostfile ...
type DeepSpeed struct{}

// Name returns "deepspeed".
func (DeepSpeed) Name() schemas.Framework { return schemas.FrameworkDeepSpeed }

// PortNames returns the rendezvous port.
func (DeepSpeed) PortNames() []string { return []string{PortRendezvous} }

// Env returns PyTorch's environment plus DLC_HOSTFILE_CONTENT.
func (DeepSpeed) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	var file strings.Builder
	for _, n := range RankOrder(g) {
		file.WriteString(ep.Host(n.Role, n.Index) + " slots=" + strconv.Itoa(slots(n)) + "\n")
	}
	return append(torchEnv(g, r, ep), schemas.EnvVar{Name: "DLC_HOSTFILE_CONTENT", Value: file.String()})
}

// Outcome fails the job when any replica fails and succeeds it when all have.
func (DeepSpeed) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}
