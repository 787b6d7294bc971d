#!/bin/sh
# The launcher of examples/mpi/job.yaml: shows the hostfile OpenDLC gave the job, then
# runs its arguments under mpirun. Open MPI reads the hostfile that
# OMPI_MCA_orte_default_hostfile names and, without -np, starts one rank per slot, so
# nothing here lists hosts or counts ranks.
set -eu
hostfile=${OMPI_MCA_orte_default_hostfile:?"not set: run this as the launcher of an OpenDLC mpi job"}
sed 's/^/hostfile: /' "$hostfile"
exec mpirun "$@"
