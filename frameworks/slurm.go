package frameworks

import (
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Slurm gives sbatch-style scripts the variables they read, without a Slurm cluster: the
// launcher (role "launcher", exactly one) plays the batch step and the workers are the
// allocated nodes (the launcher itself when there are no workers). Each worker runs a
// task per GPU, or one without GPUs. There is no srun: the launcher reaches the nodes by
// its own means (ssh, pdsh, or a rendezvous of the program's own), and each worker runs
// its command with its own SLURM_NODEID and SLURM_PROCID.
//
// The launcher gets SLURM_NODEID=0 and SLURM_PROCID=0, as a batch script on the first
// node would. SLURM_JOB_ID is the gang's id (<workspace>.<job>.a<attempt>), not a number.
type Slurm struct{}

// Name returns "slurm".
func (Slurm) Name() schemas.Framework { return schemas.FrameworkSlurm }

// PortNames returns nil.
func (Slurm) PortNames() []string { return nil }

// slurmLauncher is the role that plays the batch step.
const slurmLauncher = "launcher"

// Env returns SLURM_JOB_ID, SLURM_JOB_NAME, SLURM_JOB_NODELIST and SLURM_NODELIST (the
// nodes' hosts, comma-separated, in RankOrder), SLURM_NNODES and SLURM_JOB_NUM_NODES,
// SLURM_NTASKS and SLURM_NPROCS (the total of the tasks), SLURM_TASKS_PER_NODE (Slurm's
// compressed form, e.g. "8(x2),4"), SLURM_NODEID, SLURM_PROCID (the node's first task),
// SLURM_LOCALID=0 and, when the replica has a working directory, SLURM_SUBMIT_DIR.
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
	env := []schemas.EnvVar{
		{Name: "SLURM_JOB_ID", Value: g.ID()},
		{Name: "SLURM_JOB_NAME", Value: g.Job},
		{Name: "SLURM_JOB_NODELIST", Value: nodelist},
		{Name: "SLURM_NODELIST", Value: nodelist},
		{Name: "SLURM_NNODES", Value: nnodes},
		{Name: "SLURM_JOB_NUM_NODES", Value: nnodes},
		{Name: "SLURM_NTASKS", Value: nt},
		{Name: "SLURM_NPROCS", Value: nt},
		{Name: "SLURM_TASKS_PER_NODE", Value: compressCounts(tasks)},
		{Name: "SLURM_NODEID", Value: strconv.Itoa(nodeID)},
		{Name: "SLURM_PROCID", Value: strconv.Itoa(procID)},
		{Name: "SLURM_LOCALID", Value: "0"},
	}
	if r.WorkingDir != "" {
		env = append(env, schemas.EnvVar{Name: "SLURM_SUBMIT_DIR", Value: r.WorkingDir})
	}
	return env
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
