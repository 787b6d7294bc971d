package frameworks

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Slurm gives sbatch-style scripts, and PyTorch Lightning's SLURMEnvironment, the
// variables they read, without a Slurm cluster: the launcher (role "launcher", exactly
// one) plays the batch step and the workers are the allocated nodes (the launcher
// itself when there are no workers). Each worker runs a task per GPU, or one without
// GPUs. There is no srun: the launcher reaches the nodes by its own means (ssh, pdsh,
// or a rendezvous of the program's own), and each worker runs its command with its own
// SLURM_NODEID and SLURM_PROCID.
//
// One process per task, as srun starts them: a node with N tasks (N GPUs) runs its
// command N times, task i with SLURM_LOCALID=i and SLURM_PROCID = the node's first task
// + i (see Command and TaskFanout). A node with one task runs its command as written.
//
// The launcher gets SLURM_NODEID=0 and SLURM_PROCID=0, as a batch script on the first
// node would. SLURM_JOB_ID is a number, as Slurm's (Lightning reads it with int()):
// a stable one derived from the gang's id, see slurmJobID.
//
// Lightning takes MASTER_ADDR from the first host of SLURM_NODELIST and MASTER_PORT
// from the environment when set, else from the job id's last digits, a port nobody
// reserved. So Slurm sets MASTER_PORT to the gang's rendezvous port (and MASTER_ADDR to
// node 0's host, which Lightning would derive anyway): rank 0 serves there.
type Slurm struct{ rendezvousPorts }

// Name returns "slurm".
func (Slurm) Name() schemas.Framework { return schemas.FrameworkSlurm }

// slurmLauncher is the role that plays the batch step.
const slurmLauncher = "launcher"

// maxSlurmJobID bounds the job ids Slurm hands out (its MAX_JOB_ID, 0x03FFFFFF).
const maxSlurmJobID = 0x03FFFFFF

// slurmJobID is a stable positive job id for the gang: 1 + the FNV-1a hash of its id
// modulo Slurm's largest job id. Two gangs may share one; nothing but logs and file
// names keys on it.
func slurmJobID(g backend.GangSpec) string {
	h := fnv.New32a()
	h.Write([]byte(g.ID()))
	return strconv.FormatUint(uint64(h.Sum32()%maxSlurmJobID)+1, 10)
}

// Env returns SLURM_JOB_ID and SLURM_JOBID (the number), SLURM_JOB_NAME,
// SLURM_JOB_NODELIST and SLURM_NODELIST (the nodes' hosts, comma-separated, in
// RankOrder), SLURM_NNODES and SLURM_JOB_NUM_NODES, SLURM_NTASKS and SLURM_NPROCS (the
// total of the tasks), SLURM_TASKS_PER_NODE (Slurm's compressed form, e.g.
// "8(x2),4"), SLURM_NTASKS_PER_NODE (this node's tasks; Lightning refuses
// SLURM_NTASKS > 1 without it), SLURM_NODEID, SLURM_PROCID (the node's first task),
// SLURM_LOCALID=0 (TaskFanout sets each task's own SLURM_PROCID and SLURM_LOCALID),
// SLURM_GPUS_ON_NODE (when the node has GPUs), SLURM_SUBMIT_DIR (when
// the replica has a working directory), MASTER_ADDR and MASTER_PORT.
func (Slurm) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	nodes := workerNodes(g, slurmLauncher)
	hosts := make([]string, len(nodes))
	tasks := make([]int, len(nodes))
	ntasks, nodeID, procID := 0, 0, 0
	for i, n := range nodes {
		if n.Role == r.Role && n.Index == r.Index {
			nodeID, procID = i, ntasks
		}
		hosts[i] = ep.Host(n.Role, n.Index)
		tasks[i] = slots(n)
		ntasks += tasks[i]
	}
	nodelist, nnodes, nt := strings.Join(hosts, ","), strconv.Itoa(len(nodes)), strconv.Itoa(ntasks)
	id := slurmJobID(g)
	env := []schemas.EnvVar{
		{Name: "SLURM_JOB_ID", Value: id},
		{Name: "SLURM_JOBID", Value: id},
		{Name: "SLURM_JOB_NAME", Value: g.Job},
		{Name: "SLURM_JOB_NODELIST", Value: nodelist},
		{Name: "SLURM_NODELIST", Value: nodelist},
		{Name: "SLURM_NNODES", Value: nnodes},
		{Name: "SLURM_JOB_NUM_NODES", Value: nnodes},
		{Name: "SLURM_NTASKS", Value: nt},
		{Name: "SLURM_NPROCS", Value: nt},
		{Name: "SLURM_TASKS_PER_NODE", Value: compressCounts(tasks)},
		{Name: "SLURM_NTASKS_PER_NODE", Value: strconv.Itoa(tasks[nodeID])},
		{Name: "SLURM_NODEID", Value: strconv.Itoa(nodeID)},
		{Name: "SLURM_PROCID", Value: strconv.Itoa(procID)},
		{Name: "SLURM_LOCALID", Value: "0"},
	}
	if r.Resources.GPU > 0 {
		env = append(env, schemas.EnvVar{Name: "SLURM_GPUS_ON_NODE", Value: strconv.Itoa(int(r.Resources.GPU))})
	}
	if r.WorkingDir != "" {
		env = append(env, schemas.EnvVar{Name: "SLURM_SUBMIT_DIR", Value: r.WorkingDir})
	}
	return append(env,
		schemas.EnvVar{Name: "MASTER_ADDR", Value: hosts[0]},
		schemas.EnvVar{Name: "MASTER_PORT", Value: strconv.Itoa(ep.Port(PortRendezvous))},
	)
}

// Command runs a node's command once per task (TaskFanout, which needs /bin/sh in the
// image, and GNU grep, mkfifo and mktemp to relay whole lines) when the node has more than one; the launcher, when it is not a node, and
// single-task nodes run theirs as written. Without workers the launcher is the only
// node, and runs one process per task.
func (Slurm) Command(g backend.GangSpec, r backend.ReplicaSpec) []string {
	for _, n := range workerNodes(g, slurmLauncher) {
		if n.Role == r.Role && n.Index == r.Index {
			return fanOut(slots(n), r.Command)
		}
	}
	return r.Command
}

// compressCounts writes counts as Slurm writes SLURM_TASKS_PER_NODE: runs of equal
// counts as "n(xk)", separated by commas.
func compressCounts(counts []int) string {
	var parts []string
	for i := 0; i < len(counts); {
		j := i
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		p := strconv.Itoa(counts[i])
		if j-i > 1 {
			p += "(x" + strconv.Itoa(j-i) + ")"
		}
		parts = append(parts, p)
		i = j
	}
	return strings.Join(parts, ",")
}

// Outcome lets the launcher decide: the job succeeds when the batch step does. Any
// failed replica fails the job, since the batch step would wait for a node that is gone.
func (Slurm) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return leaderDecides(replicas, slurmLauncher, 0, true)
}
