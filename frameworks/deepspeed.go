package frameworks

import (
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// DeepSpeed runs DeepSpeed programs under torch.distributed's rendezvous (the way the
// deepspeed launcher's --no_ssh mode and torchrun both start them), and also gives the
// hostfile the ssh-based launcher reads: DLC_HOSTFILE_CONTENT, a line "host slots=N" per
// host in rank order (N = its replicas' GPUs, or 1 per replica without GPUs; a host
// shared by several replicas, 127.0.0.1 on the local backend, is listed once with their
// slots summed, since the launcher keys hosts by name). Write it out with
// printf '%s' "$DLC_HOSTFILE_CONTENT" > /job/hostfile; deepspeed --hostfile /job/hostfile ...
type DeepSpeed struct{ torchRendezvous }

// Name returns "deepspeed".
func (DeepSpeed) Name() schemas.Framework { return schemas.FrameworkDeepSpeed }

// Env returns PyTorch's environment plus DLC_HOSTFILE_CONTENT.
func (DeepSpeed) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	file := hostfile(hostSlots(RankOrder(g), ep))
	return append(torchEnv(g, r, ep), schemas.EnvVar{Name: "DLC_HOSTFILE_CONTENT", Value: file})
}
