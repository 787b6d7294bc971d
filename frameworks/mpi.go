package frameworks

import (
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// MPI runs mpirun on the launcher against the workers, as the MPI Operator does: the
// launcher is not in the host list (unless there are no workers, when it is the only
// host), and each worker has one slot per GPU, or one without GPUs.
//
// OpenDLC writes no files into replicas, so the hostfile comes as a variable: the
// launcher's script writes it before calling mpirun, e.g.
//
//	printf '%s' "$DLC_HOSTFILE_CONTENT" > /tmp/hostfile
//	mpirun --hostfile /tmp/hostfile -np "$DLC_MPI_NP" python train.py
//
// or passes the hosts inline: mpirun --host "$DLC_MPI_HOSTS" -np "$DLC_MPI_NP" (Open
// MPI); Intel MPI takes -f /tmp/hostfile. How mpirun reaches the workers (ssh and its
// keys) is up to the image. No OMPI_COMM_WORLD_* variables are set: mpirun sets them for
// the ranks it starts.
type MPI struct{}

// Name returns "mpi".
func (MPI) Name() schemas.Framework { return schemas.FrameworkMPI }

// PortNames returns nil: mpirun connects over ssh, which the image configures.
func (MPI) PortNames() []string { return nil }

// mpiLauncher is the role that runs mpirun.
const mpiLauncher = "launcher"

// Env returns, identically for every replica, DLC_HOSTFILE_CONTENT (a line "host slots=N"
// per worker, in index order), DLC_MPI_HOSTS (host:N,... in the same order), DLC_MPI_NP
// (the total of the slots) and OMPI_MCA_orte_keep_fqdn_hostnames=true, so that Open MPI
// does not shorten the hosts' DNS names to labels that do not resolve.
func (MPI) Env(g backend.GangSpec, _ backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	nodes := workerNodes(g, mpiLauncher)
	var file strings.Builder
	hosts := make([]string, len(nodes))
	np := 0
	for i, n := range nodes {
		h, s := ep.Host(n.Role, n.Index), slots(n)
		file.WriteString(h + " slots=" + strconv.Itoa(s) + "\n")
		hosts[i] = h + ":" + strconv.Itoa(s)
		np += s
	}
	return []schemas.EnvVar{
		{Name: "DLC_HOSTFILE_CONTENT", Value: file.String()},
		{Name: "DLC_MPI_HOSTS", Value: strings.Join(hosts, ",")},
		{Name: "DLC_MPI_NP", Value: strconv.Itoa(np)},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
	}
}

// Outcome lets the launcher decide: the job succeeds when mpirun does. Workers only
// serve mpirun and never succeed by themselves; any failed replica fails the job, since
// mpirun cannot finish without its hosts.
func (MPI) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return leaderDecides(replicas, mpiLauncher, 0, true)
}

// workerNodes returns the hosts a launcher-based framework hands out: every replica
// that is not the launcher, in RankOrder, or the launcher alone when it has no peers.
func workerNodes(g backend.GangSpec, launcher string) []backend.ReplicaSpec {
	var nodes []backend.ReplicaSpec
	for _, x := range RankOrder(g) {
		if x.Role != launcher {
			nodes = append(nodes, x)
		}
	}
	if len(nodes) == 0 {
		return roleReplicas(g, launcher)
	}
	return nodes
}
