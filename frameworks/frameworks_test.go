package frameworks

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// fakeEndpoints names each replica <role>-<index>.gang and serves fixed ports.
type fakeEndpoints map[string]int

func (fakeEndpoints) Host(role string, index int) string {
	return fmt.Sprintf("%s-%d.gang", role, index)
}
func (p fakeEndpoints) Port(name string) int { return p[name] }

var ports = fakeEndpoints{PortRendezvous: 29500, PortRayGCS: 6379, PortPaddleMaster: 36543}

// envForCase is a replica of a gang and the environment EnvFor must give it.
type envForCase struct {
	gang    backend.GangSpec
	replica backend.ReplicaSpec
	want    []schemas.EnvVar
}

// testEnvFor runs EnvFor on every case, with ports, as a subtest. want is the
// framework's own environment: the common variables (TestCommonEnv) follow it.
func testEnvFor(t *testing.T, tests map[string]envForCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EnvFor(tc.gang, tc.replica, ports)
			if err != nil {
				t.Fatalf("EnvFor: %v", err)
			}
			want := append(slices.Clone(tc.want), common(tc.replica)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("EnvFor mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// gangBuilder builds fixture gangs: gang(fw).role("worker", 2).obj().
type gangBuilder struct{ g backend.GangSpec }

func gang(f schemas.Framework) *gangBuilder {
	return &gangBuilder{g: backend.GangSpec{
		GangRef:   backend.GangRef{Workspace: "ws", Job: "j", Attempt: 1},
		Framework: f,
	}}
}

// role adds n replicas of role, each with gpus GPUs.
func (b *gangBuilder) role(name string, n int, gpus int32) *gangBuilder {
	for i := range n {
		b.g.Replicas = append(b.g.Replicas, backend.ReplicaSpec{
			Name:      b.g.ReplicaName(name, i),
			Role:      name,
			Index:     i,
			Command:   []string{"train"},
			Resources: schemas.Resources{GPU: gpus},
		})
	}
	return b
}

func (b *gangBuilder) obj() backend.GangSpec { return b.g }

func replica(g backend.GangSpec, role string, index int) backend.ReplicaSpec {
	for _, r := range g.Replicas {
		if r.Role == role && r.Index == index {
			return r
		}
	}
	panic(fmt.Sprintf("no replica %s-%d", role, index))
}

// torch is the expected torch.distributed environment of a replica with gpus GPUs.
func torch(addr string, world, rank, gpus int) []schemas.EnvVar {
	s := func(i int) string { return strconv.Itoa(i) }
	perNode := max(gpus, 1)
	return []schemas.EnvVar{
		{Name: "MASTER_ADDR", Value: addr},
		{Name: "MASTER_PORT", Value: "29500"},
		{Name: "WORLD_SIZE", Value: s(world)},
		{Name: "RANK", Value: s(rank)},
		{Name: "NODE_RANK", Value: s(rank)},
		{Name: "LOCAL_RANK", Value: "0"},
		{Name: "LOCAL_WORLD_SIZE", Value: s(perNode)},
		{Name: "PET_MASTER_ADDR", Value: addr},
		{Name: "PET_MASTER_PORT", Value: "29500"},
		{Name: "PET_NNODES", Value: s(world)},
		{Name: "PET_NODE_RANK", Value: s(rank)},
		{Name: "PET_NPROC_PER_NODE", Value: s(perNode)},
		// PAI-DLC: the container's GPUs, which its scripts give torchrun as
		// --nproc_per_node.
		{Name: "KUBERNETES_CONTAINER_RESOURCE_GPU", Value: s(gpus)},
	}
}

func TestEnvFor(t *testing.T) {
	masterWorkers := gang(schemas.FrameworkPyTorch).role("worker", 3, 8).role("master", 1, 8).obj()
	workersOnly := gang(schemas.FrameworkPyTorch).role("worker", 2, 0).obj()
	// No master: the worker role leads even though "evaluator" sorts first, so that rank
	// 0 is the replica at MASTER_ADDR.
	evalWorkers := gang(schemas.FrameworkPyTorch).role("worker", 2, 1).role("evaluator", 1, 0).obj()
	// Neither master nor worker: the first role by name leads.
	chiefPS := gang(schemas.FrameworkPyTorch).role("ps", 1, 0).role("chief", 1, 0).obj()
	ds := gang(schemas.FrameworkDeepSpeed).role("worker", 2, 4).obj()
	mg := gang(schemas.FrameworkMegatron).role("master", 1, 2).role("worker", 1, 2).obj()
	custom := gang(schemas.FrameworkCustom).role("worker", 2, 0).role("master", 1, 0).role("aux", 1, 0).obj()

	tests := map[string]envForCase{
		"pytorch master is rank 0":                          {gang: masterWorkers, replica: replica(masterWorkers, "master", 0), want: torch("master-0.gang", 4, 0, 8)},
		"pytorch workers follow master by index":            {gang: masterWorkers, replica: replica(masterWorkers, "worker", 2), want: torch("master-0.gang", 4, 3, 8)},
		"pytorch worker 0 leads without master":             {gang: workersOnly, replica: replica(workersOnly, "worker", 1), want: torch("worker-0.gang", 2, 1, 0)},
		"pytorch worker leads before roles sorting earlier": {gang: evalWorkers, replica: replica(evalWorkers, "evaluator", 0), want: torch("worker-0.gang", 3, 2, 0)},
		"pytorch worker 0 is rank 0 before evaluator":       {gang: evalWorkers, replica: replica(evalWorkers, "worker", 0), want: torch("worker-0.gang", 3, 0, 1)},
		"pytorch first role by name leads otherwise":        {gang: chiefPS, replica: replica(chiefPS, "ps", 0), want: torch("chief-0.gang", 2, 1, 0)},
		"deepspeed uses the pytorch rendezvous and adds a hostfile": {
			gang: ds, replica: replica(ds, "worker", 1),
			want: append(torch("worker-0.gang", 2, 1, 4),
				schemas.EnvVar{Name: "DLC_HOSTFILE", Value: "/job/hostfile"},
				schemas.EnvVar{Name: "DLC_HOSTFILE_CONTENT", Value: "worker-0.gang slots=4\nworker-1.gang slots=4\n"}),
		},
		"megatron uses the pytorch rendezvous": {gang: mg, replica: replica(mg, "worker", 0), want: torch("master-0.gang", 2, 1, 2)},
		"custom lists hosts in rank order": {
			gang: custom, replica: replica(custom, "worker", 1),
			want: []schemas.EnvVar{
				{Name: "DLC_HOSTS", Value: "master-0=master-0.gang,aux-0=aux-0.gang,worker-0=worker-0.gang,worker-1=worker-1.gang"},
				{Name: "DLC_WORLD_SIZE", Value: "4"},
				{Name: "DLC_RANK", Value: "3"},
			},
		},
	}
	testEnvFor(t, tests)
}

// TestEnvForIsDeterministic checks that the order of the gang's replicas does not change
// anything, for any framework, since backends may list replicas in any order.
func TestEnvForIsDeterministic(t *testing.T) {
	gangs := []backend.GangSpec{
		gang(schemas.FrameworkPyTorch).role("worker", 3, 0).role("master", 1, 0).role("aux", 2, 0).obj(),
		gang(schemas.FrameworkDeepSpeed).role("worker", 3, 2).role("master", 1, 2).obj(),
		gang(schemas.FrameworkMegatron).role("worker", 3, 2).obj(),
		gang(schemas.FrameworkTensorFlow).role("worker", 3, 1).role("ps", 2, 0).role("chief", 1, 0).role("evaluator", 1, 0).obj(),
		gang(schemas.FrameworkMPI).role("worker", 3, 4).role("launcher", 1, 0).obj(),
		gang(schemas.FrameworkXGBoost).role("worker", 3, 0).role("master", 1, 0).obj(),
		gang(schemas.FrameworkPaddle).role("worker", 3, 0).role("master", 2, 0).obj(),
		gang(schemas.FrameworkPaddle).role("worker", 3, 1).obj(),
		gang(schemas.FrameworkRay).role("worker", 3, 0).role("head", 1, 0).obj(),
		gang(schemas.FrameworkSlurm).role("worker", 3, 8).role("launcher", 1, 0).obj(),
		gang(schemas.FrameworkPreprocess).role("worker", 4, 0).obj(),
		gang(schemas.FrameworkInference).role("worker", 4, 1).obj(),
		gang(schemas.FrameworkCustom).role("worker", 3, 0).role("master", 1, 0).role("aux", 2, 0).obj(),
	}
	covered := map[schemas.Framework]bool{}
	for _, g := range gangs {
		covered[g.Framework] = true
		reversed := g
		reversed.Replicas = nil
		for _, v := range slices.Backward(g.Replicas) {
			reversed.Replicas = append(reversed.Replicas, v)
		}
		for _, ep := range []Endpoints{ports, sharedEndpoints{ports}} {
			for _, r := range g.Replicas {
				a, err := EnvFor(g, r, ep)
				if err != nil {
					t.Fatal(err)
				}
				b, err := EnvFor(reversed, r, ep)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a, b); diff != "" {
					t.Errorf("%s %s: env depends on replica order (-sorted +reversed):\n%s", g.Framework, r.Name, diff)
				}
			}
		}
	}
	for _, f := range Supported() {
		if !covered[f] {
			t.Errorf("framework %s is not covered", f)
		}
	}
}

// common is the environment every replica gets after its framework's, when the job
// does not set it.
func common(r backend.ReplicaSpec) []schemas.EnvVar {
	n := 1
	if r.Resources.GPU > 0 {
		n = int(r.Resources.GPU)
	}
	return []schemas.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "1"}, {Name: "NPROC_PER_NODE", Value: strconv.Itoa(n)}}
}

// Every framework's replicas get PYTHONUNBUFFERED=1 and NPROC_PER_NODE (GPUs, or 1),
// unless the replica's own environment sets them: the job's value wins.
func TestCommonEnv(t *testing.T) {
	for _, f := range Supported() {
		g := gang(f).role("launcher", 1, 0).role("head", 1, 0).role("worker", 2, 4).obj()
		for _, r := range g.Replicas {
			got, err := EnvFor(g, r, ports)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if diff := cmp.Diff(common(r), got[len(got)-2:]); diff != "" {
				t.Errorf("%s %s: common env (-want +got):\n%s", f, r.Name, diff)
			}
		}
	}
	g := gang(schemas.FrameworkPyTorch).role("worker", 1, 8).obj()
	g.Replicas[0].Env = []schemas.EnvVar{{Name: "PYTHONUNBUFFERED", Value: ""}}
	got, err := EnvFor(g, g.Replicas[0], ports)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		if e.Name == "PYTHONUNBUFFERED" {
			t.Errorf("EnvFor sets PYTHONUNBUFFERED=%q over the job's own", e.Value)
		}
	}
	if last := got[len(got)-1]; last != (schemas.EnvVar{Name: "NPROC_PER_NODE", Value: "8"}) {
		t.Errorf("last variable %v, want NPROC_PER_NODE=8", last)
	}
}

// PAI-DLC's KUBERNETES_CONTAINER_RESOURCE_GPU is the container's GPUs (0 without) on
// every replica of the PyTorch family, which Alibaba's DLC scripts hand to torchrun as
// --nproc_per_node; other frameworks do not set it, and the job's own value wins.
func TestContainerResourceGPU(t *testing.T) {
	const name = "KUBERNETES_CONTAINER_RESOURCE_GPU"
	for _, f := range []schemas.Framework{schemas.FrameworkPyTorch, schemas.FrameworkDeepSpeed, schemas.FrameworkMegatron} {
		g := gang(f).role("master", 1, 0).role("worker", 2, 8).obj()
		for _, r := range g.Replicas {
			want := strconv.Itoa(int(r.Resources.GPU))
			if got, ok := envMap(t, g, r)[name]; !ok || got != want {
				t.Errorf("%s %s: %s = %q (set %v), want %q", f, r.Name, name, got, ok, want)
			}
		}
		g.Replicas[1].Env = []schemas.EnvVar{{Name: name, Value: "4"}}
		if v, ok := envMap(t, g, g.Replicas[1])[name]; ok {
			t.Errorf("%s: EnvFor sets %s=%q over the job's own", f, name, v)
		}
	}
	for _, f := range []schemas.Framework{schemas.FrameworkTensorFlow, schemas.FrameworkXGBoost, schemas.FrameworkPreprocess} {
		g := gang(f).role("worker", 2, 8).obj()
		if v, ok := envMap(t, g, g.Replicas[0])[name]; ok {
			t.Errorf("%s sets %s=%q", f, name, v)
		}
	}
}

func TestRankOrder(t *testing.T) {
	tests := map[string]struct {
		gang backend.GangSpec
		want []string
	}{
		"master then roles by name":   {gang: gang(schemas.FrameworkPyTorch).role("worker", 2, 0).role("aux", 1, 0).role("master", 1, 0).obj(), want: []string{"master-0", "aux-0", "worker-0", "worker-1"}},
		"worker leads without master": {gang: gang(schemas.FrameworkPyTorch).role("worker", 1, 0).role("aux", 1, 0).obj(), want: []string{"worker-0", "aux-0"}},
		"indexes numerically, not as text": {
			gang: gang(schemas.FrameworkPyTorch).role("worker", 12, 0).obj(),
			want: []string{"worker-0", "worker-1", "worker-2", "worker-3", "worker-4", "worker-5",
				"worker-6", "worker-7", "worker-8", "worker-9", "worker-10", "worker-11"},
		},
		"empty gang": {gang: gang(schemas.FrameworkPyTorch).obj(), want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, r := range RankOrder(tc.gang) {
				got = append(got, fmt.Sprintf("%s-%d", r.Role, r.Index))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RankOrder mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvForErrors(t *testing.T) {
	g := gang(schemas.FrameworkPyTorch).role("worker", 2, 0).obj()
	ray := gang(schemas.FrameworkRay).role("head", 1, 0).obj()
	jax := gang("jax").role("worker", 1, 0).obj()
	tests := map[string]struct {
		gang    backend.GangSpec
		replica backend.ReplicaSpec
		ep      Endpoints
		want    error
	}{
		"unregistered framework": {gang: jax, replica: jax.Replicas[0], ep: ports, want: ErrUnknownFramework},
		"replica not in gang": {
			gang: g, replica: backend.ReplicaSpec{Role: "worker", Index: 5}, ep: ports, want: ErrReplicaNotInGang,
		},
		"port not allocated": {gang: g, replica: g.Replicas[0], ep: fakeEndpoints{}},
		"ray port not allocated": {
			gang: ray, replica: ray.Replicas[0], ep: fakeEndpoints{PortRendezvous: 29500},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := EnvFor(tc.gang, tc.replica, tc.ep)
			if err == nil {
				t.Fatal("EnvFor succeeded, want an error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("EnvFor error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	for _, f := range Supported() {
		fw, err := Get(f)
		if err != nil {
			t.Fatalf("Get(%q): %v", f, err)
		}
		if fw.Name() != f {
			t.Errorf("Get(%q).Name() = %q", f, fw.Name())
		}
	}
	// Every framework a job may name has rules.
	want := schemas.Frameworks
	if diff := cmp.Diff(want, Supported()); diff != "" {
		t.Errorf("Supported mismatch (-want +got):\n%s", diff)
	}
	if _, err := Get("nope"); !errors.Is(err, ErrUnknownFramework) {
		t.Errorf("Get(nope) error = %v, want ErrUnknownFramework", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
