package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// mpiEnv is the environment every MPI replica gets, before K_MPI_JOB_ROLE.
func mpiEnv(file, hosts, np, dir string, defaultSlots string) []schemas.EnvVar {
	env := []schemas.EnvVar{
		{Name: "DLC_HOSTFILE_CONTENT", Value: file},
		{Name: "DLC_MPI_HOSTS", Value: hosts},
		{Name: "DLC_MPI_NP", Value: np},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: dir + "/hostfile"},
		{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"},
	}
	if defaultSlots != "" {
		env = append(env, schemas.EnvVar{Name: "OMPI_MCA_orte_set_default_slots", Value: defaultSlots})
	}
	return env
}

// role appends K_MPI_JOB_ROLE, and for a launcher that is no host the emptied NVIDIA
// variables.
func withRole(env []schemas.EnvVar, role string, noGPUs bool) []schemas.EnvVar {
	env = append(append([]schemas.EnvVar{}, env...), schemas.EnvVar{Name: "K_MPI_JOB_ROLE", Value: role})
	if noGPUs {
		env = append(env, schemas.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES"}, schemas.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES"})
	}
	return env
}

func TestMPIEnv(t *testing.T) {
	gpus := gang(schemas.FrameworkMPI).role("worker", 2, 8).role("launcher", 1, 0).obj()
	cpus := gang(schemas.FrameworkMPI).role("launcher", 1, 0).role("worker", 3, 0).obj()
	alone := gang(schemas.FrameworkMPI).role("launcher", 1, 4).obj()
	mixed := gang(schemas.FrameworkMPI).role("launcher", 1, 0).role("big", 1, 8).role("worker", 2, 2).obj()
	gpuEnv := mpiEnv("worker-0.gang slots=8\nworker-1.gang slots=8\n", "worker-0.gang:8,worker-1.gang:8", "16", "/etc/mpi", "8")

	tests := map[string]envForCase{
		"launcher: a slot per worker GPU": {
			gang: gpus, replica: replica(gpus, "launcher", 0), want: withRole(gpuEnv, "launcher", true),
		},
		"workers get the same but their role": {
			gang: gpus, replica: replica(gpus, "worker", 1), want: withRole(gpuEnv, "worker", false),
		},
		"one slot per worker without GPUs": {
			gang: cpus, replica: replica(cpus, "launcher", 0),
			want: withRole(mpiEnv("worker-0.gang slots=1\nworker-1.gang slots=1\nworker-2.gang slots=1\n",
				"worker-0.gang:1,worker-1.gang:1,worker-2.gang:1", "3", "/etc/mpi", "1"), "launcher", true),
		},
		"launcher alone is its own host and keeps its GPUs": {
			gang: alone, replica: replica(alone, "launcher", 0),
			want: withRole(mpiEnv("launcher-0.gang slots=4\n", "launcher-0.gang:4", "4", "/etc/mpi", "4"), "launcher", false),
		},
		"no default slots when workers differ (rank order: worker leads)": {
			gang: mixed, replica: replica(mixed, "big", 0),
			want: withRole(mpiEnv("worker-0.gang slots=2\nworker-1.gang slots=2\nbig-0.gang slots=8\n",
				"worker-0.gang:2,worker-1.gang:2,big-0.gang:8", "12", "/etc/mpi", ""), "worker", false),
		},
	}
	testEnvFor(t, tests)
}

// localEndpoints put every replica on 127.0.0.1 and the files under a state directory,
// as the local backend does.
type localEndpoints struct{ fakeEndpoints }

func (localEndpoints) Host(string, int) string    { return "127.0.0.1" }
func (localEndpoints) FilesDir(dir string) string { return "/state/gang/files" + dir }

// On a shared host, the hostfile names it once with every worker's slots: Open MPI
// refuses a hostfile that repeats a host.
func TestMPISharedHost(t *testing.T) {
	g := gang(schemas.FrameworkMPI).role("launcher", 1, 0).role("worker", 3, 2).obj()
	ep := localEndpoints{ports}
	got, err := EnvFor(g, replica(g, "launcher", 0), ep)
	if err != nil {
		t.Fatal(err)
	}
	want := append(withRole(mpiEnv("127.0.0.1 slots=6\n", "127.0.0.1:6", "6", "/state/gang/files/etc/mpi", "2"), "launcher", true),
		common(replica(g, "launcher", 0))...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EnvFor mismatch (-want +got):\n%s", diff)
	}

	checkFiles(t, g, ep, "/state/gang/files/etc/mpi", []File{
		{Name: "hostfile", Content: "127.0.0.1 slots=6\n", Mode: 0o444},
		{Name: "discover_hosts.sh", Content: "#!/bin/sh\necho 127.0.0.1:6\n", Mode: 0o555},
	})
}

// Hosts keep the order in which they first appear, each listed once.
func TestMPIFilesOnDistinctHosts(t *testing.T) {
	g := gang(schemas.FrameworkMPI).role("worker", 2, 4).role("launcher", 1, 0).obj()
	// mpi-operator's directory.
	checkFiles(t, g, ports, "/etc/mpi", []File{
		{Name: "hostfile", Content: "worker-0.gang slots=4\nworker-1.gang slots=4\n", Mode: 0o444},
		{Name: "discover_hosts.sh", Content: "#!/bin/sh\necho worker-0.gang:4\necho worker-1.gang:4\n", Mode: 0o555},
	})
}

// checkFiles checks the directory and the files FilesFor gives gang g.
func checkFiles(t *testing.T, g backend.GangSpec, ep Endpoints, wantDir string, want []File) {
	t.Helper()
	dir, files, err := FilesFor(g, ep)
	if err != nil {
		t.Fatal(err)
	}
	if dir != wantDir {
		t.Errorf("files dir = %q, want %q", dir, wantDir)
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files mismatch (-want +got):\n%s", diff)
	}
}

// Frameworks without files have none.
func TestFilesForWithoutFiles(t *testing.T) {
	g := gang(schemas.FrameworkPyTorch).role("worker", 2, 0).obj()
	dir, files, err := FilesFor(g, ports)
	if err != nil || dir != "" || files != nil {
		t.Errorf("FilesFor(pytorch) = %q, %v, %v; want nothing", dir, files, err)
	}
	if _, _, err := FilesFor(gang("jax").obj(), ports); err == nil {
		t.Error("FilesFor(jax) succeeded, want an unknown-framework error")
	}
}
