package frameworks

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestMPIEnv(t *testing.T) {
	gpus := gang(schemas.FrameworkMPI).role("worker", 2, 8).role("launcher", 1, 0).obj()
	cpus := gang(schemas.FrameworkMPI).role("launcher", 1, 0).role("worker", 3, 0).obj()
	alone := gang(schemas.FrameworkMPI).role("launcher", 1, 4).obj()
	mpi := func(file, hosts, np string) []schemas.EnvVar {
		return []schemas.EnvVar{
			{Name: "DLC_HOSTFILE_CONTENT", Value: file},
			{Name: "DLC_MPI_HOSTS", Value: hosts},
			{Name: "DLC_MPI_NP", Value: np},
			{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
		}
	}
	gpuEnv := mpi("worker-0.gang slots=8\nworker-1.gang slots=8\n", "worker-0.gang:8,worker-1.gang:8", "16")

	tests := map[string]envForCase{
		"launcher: a slot per worker GPU": {gang: gpus, replica: replica(gpus, "launcher", 0), want: gpuEnv},
		"workers get the same":            {gang: gpus, replica: replica(gpus, "worker", 1), want: gpuEnv},
		"one slot per worker without GPUs": {
			gang: cpus, replica: replica(cpus, "launcher", 0),
			want: mpi("worker-0.gang slots=1\nworker-1.gang slots=1\nworker-2.gang slots=1\n",
				"worker-0.gang:1,worker-1.gang:1,worker-2.gang:1", "3"),
		},
		"launcher alone is its own host": {
			gang: alone, replica: replica(alone, "launcher", 0),
			want: mpi("launcher-0.gang slots=4\n", "launcher-0.gang:4", "4"),
		},
	}
	testEnvFor(t, tests)
}
