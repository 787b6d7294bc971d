package frameworks

import (
	"fmt"
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// PyTorch is torch.distributed's static rendezvous, in the form torchrun and
// torch.distributed.init_process_group("env://") read it: one node per replica, rank 0
// (the leader role's replica 0) serving the TCPStore at MASTER_ADDR:MASTER_PORT.
//
// Both spellings are set: the bare names for programs that call init_process_group
// themselves, and the PET_* names for torchrun, which reads its flags from them (as
// Kubeflow's PyTorchJob does). When torchrun runs, it overwrites WORLD_SIZE, RANK,
// LOCAL_RANK and LOCAL_WORLD_SIZE for the processes it spawns, counting processes rather
// than nodes.
//
// KUBERNETES_CONTAINER_RESOURCE_GPU is the replica's GPUs (0 without), as PAI-DLC sets
// it: Alibaba's own DLC launch scripts (Pai-Megatron-Patch's run_*.sh, in their dlc
// branch) pass it to torchrun as --nproc_per_node. The job's env wins over it.
type PyTorch struct{ torchRendezvous }

// Name returns "pytorch".
func (PyTorch) Name() schemas.Framework { return schemas.FrameworkPyTorch }

// torchEnv is shared by every framework built on torch.distributed.
func torchEnv(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	order := RankOrder(g)
	masterAddr := ""
	if len(order) > 0 {
		masterAddr = ep.Host(order[0].Role, order[0].Index)
	}
	masterPort := strconv.Itoa(ep.Port(PortRendezvous))
	worldSize := strconv.Itoa(len(order))
	rank := strconv.Itoa(rankOf(g, r))
	// One process per replica unless the replica has GPUs, in which case torchrun starts
	// one process per GPU.
	perNode := "1"
	if r.Resources.GPU > 0 {
		perNode = strconv.Itoa(int(r.Resources.GPU))
	}
	nnodes := worldSize
	var elastic []schemas.EnvVar
	if e := g.Elastic; e != nil {
		// torchrun's elastic rendezvous: nodes join the c10d store on the leader and
		// the job runs with any count between min and max.
		nnodes = fmt.Sprintf("%d:%d", e.MinReplicas, e.MaxReplicas)
		elastic = []schemas.EnvVar{
			{Name: "PET_RDZV_BACKEND", Value: "c10d"},
			{Name: "PET_RDZV_ENDPOINT", Value: masterAddr + ":" + masterPort},
			{Name: "PET_RDZV_ID", Value: g.ID()},
		}
		elastic = append(elastic, elasticDefaults(r, rank == "0")...)
	}
	env := append([]schemas.EnvVar{
		{Name: "MASTER_ADDR", Value: masterAddr},
		{Name: "MASTER_PORT", Value: masterPort},
		{Name: "WORLD_SIZE", Value: worldSize},
		{Name: "RANK", Value: rank},
		{Name: "NODE_RANK", Value: rank},
		{Name: "LOCAL_RANK", Value: "0"},
		{Name: "LOCAL_WORLD_SIZE", Value: perNode},
		{Name: "PET_MASTER_ADDR", Value: masterAddr},
		{Name: "PET_MASTER_PORT", Value: masterPort},
		{Name: "PET_NNODES", Value: nnodes},
		{Name: "PET_NODE_RANK", Value: rank},
		{Name: "PET_NPROC_PER_NODE", Value: perNode},
	}, elastic...)
	return append(env, unlessSet(r, schemas.EnvVar{Name: "KUBERNETES_CONTAINER_RESOURCE_GPU", Value: strconv.Itoa(int(r.Resources.GPU))})...)
}
