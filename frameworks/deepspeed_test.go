package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// DeepSpeed's hostfile lists every replica in rank order with its GPUs as slots.
func TestDeepSpeedHostfile(t *testing.T) {
	ref := backend.GangRef{Workspace: "ws", Job: "ds"}
	g := backend.GangSpec{GangRef: ref, Framework: schemas.FrameworkDeepSpeed, Replicas: []backend.ReplicaSpec{
		{Name: ref.ReplicaName("worker", 0), Role: "worker", Index: 0, Resources: schemas.Resources{GPU: 8}},
		{Name: ref.ReplicaName("worker", 1), Role: "worker", Index: 1, Resources: schemas.Resources{GPU: 8}},
		{Name: ref.ReplicaName("master", 0), Role: "master", Index: 0},
	}}
	got := envMap(t, g, g.Replicas[0])
	want := "master-0 slots=1\nworker-0 slots=8\nworker-1 slots=8\n"
	if diff := cmp.Diff(want, got["DLC_HOSTFILE_CONTENT"]); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	if got["MASTER_ADDR"] != "master-0" || got["WORLD_SIZE"] != "3" {
		t.Errorf("torch env: MASTER_ADDR %q WORLD_SIZE %q", got["MASTER_ADDR"], got["WORLD_SIZE"])
	}
}

// envMap is EnvFor's environment for replica r of gang g as a map, with the addresses
// of hostsAndPorts.
func envMap(t *testing.T, g backend.GangSpec, r backend.ReplicaSpec) map[string]string {
	t.Helper()
	return envMapAt(t, g, r, hostsAndPorts{})
}

// envMapAt is EnvFor's environment for replica r of gang g as a map, with ep.
func envMapAt(t *testing.T, g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) map[string]string {
	t.Helper()
	env, err := EnvFor(g, r, ep)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	return got
}

// hostsAndPorts names each replica role-index and gives every port 29500.
type hostsAndPorts struct{}

func (hostsAndPorts) Host(role string, index int) string { return role + "-" + string(rune('0'+index)) }
func (hostsAndPorts) Port(string) int                    { return 29500 }

// An elastic PyTorch job gets torchrun's c10d rendezvous and a min:max node count.
func TestPyTorchElastic(t *testing.T) {
	ref := backend.GangRef{Workspace: "ws", Job: "el"}
	g := backend.GangSpec{GangRef: ref, Framework: schemas.FrameworkPyTorch,
		Elastic: &schemas.ElasticSpec{MinReplicas: 2, MaxReplicas: 4},
		Replicas: []backend.ReplicaSpec{
			{Name: ref.ReplicaName("worker", 0), Role: "worker", Index: 0},
			{Name: ref.ReplicaName("worker", 1), Role: "worker", Index: 1},
		}}
	got := envMap(t, g, g.Replicas[1])
	want := map[string]string{"PET_NNODES": "2:4", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "worker-0:29500", "PET_RDZV_ID": "ws.el.a0"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// On a shared host, DeepSpeed's hostfile names it once with the slots summed (its
// launcher refuses a host listed twice); the local backend's copy of /job/hostfile is
// in the gang's state directory, which DLC_HOSTFILE names.
func TestDeepSpeedHostfileSharedHost(t *testing.T) {
	g := gang(schemas.FrameworkDeepSpeed).role("worker", 2, 2).role("master", 1, 0).obj()
	ep := localEndpoints{ports}
	got := envMapAt(t, g, g.Replicas[0], ep)
	if got["DLC_HOSTFILE_CONTENT"] != "127.0.0.1 slots=5\n" || got["DLC_HOSTFILE"] != "/state/gang/files/job/hostfile" {
		t.Errorf("DLC_HOSTFILE_CONTENT = %q, DLC_HOSTFILE = %q; want one line with 5 slots, in the state directory",
			got["DLC_HOSTFILE_CONTENT"], got["DLC_HOSTFILE"])
	}
	checkFiles(t, g, ep, "/state/gang/files/job", []File{{Name: "hostfile", Content: "127.0.0.1 slots=5\n", Mode: 0o444}})
}

// DeepSpeed's hostfile is a file at /job/hostfile, where deepspeed's launcher reads it
// when no --hostfile is given (DLTS_HOSTFILE): a line "host slots=N" per replica in
// rank order, the same text as DLC_HOSTFILE_CONTENT, and DLC_HOSTFILE names it.
func TestDeepSpeedHostfileOnDisk(t *testing.T) {
	g := gang(schemas.FrameworkDeepSpeed).role("worker", 2, 8).role("master", 1, 8).obj()
	const want = "master-0.gang slots=8\nworker-0.gang slots=8\nworker-1.gang slots=8\n"
	checkFiles(t, g, ports, "/job", []File{{Name: "hostfile", Content: want, Mode: 0o444}})
	for _, r := range g.Replicas {
		got := envMapAt(t, g, r, ports)
		if got["DLC_HOSTFILE"] != "/job/hostfile" || got["DLC_HOSTFILE_CONTENT"] != want {
			t.Errorf("%s: DLC_HOSTFILE = %q, DLC_HOSTFILE_CONTENT = %q", r.Name, got["DLC_HOSTFILE"], got["DLC_HOSTFILE_CONTENT"])
		}
	}
}
