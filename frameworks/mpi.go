package frameworks

import (
	"path"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// MPI runs mpirun on the launcher against the workers, as the MPI Operator does: the
// launcher is not in the host list (unless there are no workers, when it is the only
// host), and each worker has one slot per GPU, or one without GPUs. A host that several
// replicas share (127.0.0.1 on the local backend) is listed once, with their slots
// summed, in order of first appearance: Open MPI refuses a host named twice.
//
// Like mpi-operator v2, MPI writes the hostfile to disk, /etc/mpi/hostfile, with
// discover_hosts.sh beside it for horovodrun --host-discovery-script, and points Open
// MPI at it with OMPI_MCA_orte_default_hostfile, so a plain
//
//	mpirun -np "$DLC_MPI_NP" python train.py
//
// finds its hosts (see FileProvider for where each backend puts the files). The
// hostfile also comes as a variable, DLC_HOSTFILE_CONTENT, and inline as DLC_MPI_HOSTS
// (mpirun --host "$DLC_MPI_HOSTS"). How mpirun reaches the workers over ssh is the
// image's business, with the key pair the Kubernetes backend mounts. No
// OMPI_COMM_WORLD_* variables are set: mpirun sets them for the ranks it starts.
type MPI struct{ noPorts }

// Name returns "mpi".
func (MPI) Name() schemas.Framework { return schemas.FrameworkMPI }

// mpiLauncher is the role that runs mpirun.
const mpiLauncher = "launcher"

// MPIConfigDir is where mpi-operator mounts an MPIJob's hostfile and discovery script,
// and so where MPI's Files go.
const MPIConfigDir = "/etc/mpi"

// Names of MPI's files in MPIConfigDir, as mpi-operator names them.
const (
	MPIHostfile      = "hostfile"
	MPIDiscoverHosts = "discover_hosts.sh"
)

// Env returns DLC_HOSTFILE_CONTENT (the hostfile), DLC_MPI_HOSTS (host:N,... in the
// same order), DLC_MPI_NP (the total of the slots), then the variables mpi-operator v2
// gives an Open MPI launcher: OMPI_MCA_orte_keep_fqdn_hostnames=true (Open MPI must
// not shorten the hosts' DNS names to labels that do not resolve),
// OMPI_MCA_orte_default_hostfile (the hostfile on disk), OMPI_MCA_plm_rsh_args (ssh
// retries while workers start) and OMPI_MCA_orte_set_default_slots (a worker's slots,
// when every worker has the same), and K_MPI_JOB_ROLE (launcher or worker). Every
// replica gets them, the workers too, so a worker script sees the same as the launcher;
// only K_MPI_JOB_ROLE differs, and a launcher that is not a host and has no GPUs gets
// NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES emptied, as mpi-operator does,
// so it cannot take GPUs the workers need.
func (m MPI) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	nodes := workerNodes(g, mpiLauncher)
	hosts := hostSlots(nodes, ep)
	inline := make([]string, len(hosts))
	np := 0
	for i, h := range hosts {
		inline[i] = h.host + ":" + strconv.Itoa(h.slots)
		np += h.slots
	}
	env := []schemas.EnvVar{
		{Name: "DLC_HOSTFILE_CONTENT", Value: hostfile(hosts)},
		{Name: "DLC_MPI_HOSTS", Value: strings.Join(inline, ",")},
		{Name: "DLC_MPI_NP", Value: strconv.Itoa(np)},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: path.Join(filesDir(m, ep), MPIHostfile)},
		{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"},
	}
	if s, ok := sameSlots(nodes); ok {
		env = append(env, schemas.EnvVar{Name: "OMPI_MCA_orte_set_default_slots", Value: strconv.Itoa(s)})
	}
	role := "worker"
	if r.Role == mpiLauncher {
		role = mpiLauncher
	}
	env = append(env, schemas.EnvVar{Name: "K_MPI_JOB_ROLE", Value: role})
	if r.Role == mpiLauncher && nodes[0].Role != mpiLauncher && r.Resources.GPU == 0 {
		env = append(env,
			schemas.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""},
			schemas.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
		)
	}
	return env
}

// FilesDir returns MPIConfigDir.
func (MPI) FilesDir() string { return MPIConfigDir }

// Files returns the hostfile (as DLC_HOSTFILE_CONTENT) and discover_hosts.sh, a
// script that prints a line host:slots per host of the hostfile. mpi-operator's prints
// the hosts of the workers running at the time and no slots; this one is written once
// per attempt, so it lists every host, and says each one's slots, which horovodrun
// accepts and needs where hosts are shared.
func (MPI) Files(g backend.GangSpec, ep Endpoints) []File {
	hosts := hostSlots(workerNodes(g, mpiLauncher), ep)
	var script strings.Builder
	script.WriteString("#!/bin/sh\n")
	for _, h := range hosts {
		script.WriteString("echo " + h.host + ":" + strconv.Itoa(h.slots) + "\n")
	}
	return []File{
		{Name: MPIHostfile, Content: hostfile(hosts), Mode: 0o444},
		{Name: MPIDiscoverHosts, Content: script.String(), Mode: 0o555},
	}
}

// sameSlots returns the slots of every node when they all have the same.
func sameSlots(nodes []backend.ReplicaSpec) (int, bool) {
	for _, n := range nodes[1:] {
		if slots(n) != slots(nodes[0]) {
			return 0, false
		}
	}
	return slots(nodes[0]), true
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

// LaunchesOverSSH returns true: mpirun starts the ranks on the workers over ssh.
func (MPI) LaunchesOverSSH() bool { return true }
