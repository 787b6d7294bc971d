#!/bin/sh
# The launcher of examples/mpi/job.yaml: shows the hostfile OpenDLC gave the job, then
# runs its arguments under mpirun. Open MPI reads the hostfile that
# OMPI_MCA_orte_default_hostfile names and, without -np, starts one rank per slot, so
# nothing here lists hosts or counts ranks.
#
# On Kubernetes the gang's pods start together, and a worker's DNS record appears only
# once its pod has an address: mpirun's ssh fails at once on a name that does not
# resolve yet (its ConnectionAttempts retry connections, not lookups). So the launcher
# first waits, up to DLC_MPI_WAIT_HOSTS seconds (default 120), until every host of the
# hostfile resolves, as mpi-operator's launcherCreationPolicy WaitForWorkersReady does.
set -eu
hostfile=${OMPI_MCA_orte_default_hostfile:?"not set: run this as the launcher of an OpenDLC mpi job"}
sed 's/^/hostfile: /' "$hostfile"
deadline=$(( $(date +%s) + ${DLC_MPI_WAIT_HOSTS:-120} ))
for host in $(cut -d' ' -f1 "$hostfile"); do
	until getent hosts "$host" >/dev/null; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "launch.sh: $host does not resolve" >&2
			exit 1
		fi
		sleep 0.5
	done
done
exec mpirun "$@"
