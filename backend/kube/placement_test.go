package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// gpuNode is a node with 32 CPUs, 256Gi of memory and gpus GPUs allocatable.
func gpuNode(name string, gpus int64) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
}

// llama is examples/frameworks/pytorch.yaml: a master and three workers, each with 32
// CPUs, 256Gi and 8 GPUs.
func llama() *schemastest.JobBuilder {
	return schemastest.Job("llama-sft").Workspace("nlp").
		Role("master", 1).CPU("32").Memory("256Gi").GPUs(8).
		Role("worker", 3).CPU("32").Memory("256Gi").GPUs(8)
}

func createNodes(t *testing.T, cs *fake.Clientset, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// The scenario: 4 replicas of 8 GPUs on 3 nodes of 8 GPUs can never fit.
// Launch says so, naming what is short, and creates nothing; once a fourth node joins,
// the same Launch creates the gang.
func TestLaunchRefusesAGangThatCannotFit(t *testing.T) {
	cs := newClient()
	createNodes(t, cs, gpuNode("node-0", 8), gpuNode("node-1", 8), gpuNode("node-2", 8))
	b := newBackend(t, cs)
	g := gangOf(t, llama())

	err := b.Launch(context.Background(), g)
	if !errors.Is(err, backend.ErrUnschedulable) {
		t.Fatalf("Launch: %v, want ErrUnschedulable", err)
	}
	for _, want := range []string{
		"4 replicas (master: 1, worker: 3) need cpu 32, memory 256Gi, nvidia.com/gpu 8 each",
		"the 3 nodes they may use in pool quota have room for 3",
		"nvidia.com/gpu: 32 needed, 24 allocatable (8 on each node)",
		"cpu: 128 needed, 96 allocatable (32 on each node)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q\nlacks %q", err, want)
		}
	}
	if n := len(pods(t, cs, "nlp")); n != 0 {
		t.Errorf("%d pods created for a gang that cannot fit", n)
	}
	if _, err := cs.CoreV1().Services("nlp").Get(context.Background(), "llama-sft-a1", metav1.GetOptions{}); err == nil {
		t.Error("the gang's Service was created")
	}

	createNodes(t, cs, gpuNode("node-3", 8))
	testutil.Eventually(t, 10*time.Second, "the fourth node in the cache", func() bool {
		nodes, err := b.nodes.list(context.Background())
		return err == nil && len(nodes) == 4
	})
	launch(t, b, g)
	if n := len(pods(t, cs, "nlp")); n != 4 {
		t.Errorf("%d pods, want 4", n)
	}
}

// The nodes a gang may use exclude cordoned and quarantined nodes, the nodes its
// attempt excludes, nodes its node selector does not match and nodes with taints it
// does not tolerate; transient node condition taints do not count.
func TestLaunchFitsOnlyTheNodesTheGangMayUse(t *testing.T) {
	four := func(change func(*corev1.Node)) []*corev1.Node {
		nodes := []*corev1.Node{gpuNode("node-0", 8), gpuNode("node-1", 8), gpuNode("node-2", 8), gpuNode("node-3", 8)}
		change(nodes[3])
		return nodes
	}
	for name, tc := range map[string]struct {
		nodes   []*corev1.Node
		job     *schemastest.JobBuilder
		exclude []string
		fits    bool
		want    string
	}{
		"four nodes": {nodes: four(func(*corev1.Node) {}), job: llama(), fits: true},
		"cordoned":   {nodes: four(func(n *corev1.Node) { n.Spec.Unschedulable = true }), job: llama()},
		"quarantined": {nodes: four(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: TaintQuarantined, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}), job: llama()},
		"not ready": {nodes: four(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
		}), job: llama(), fits: true},
		"tolerated taint": {nodes: four(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
		}), job: llama().Toleration(schemas.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}), fits: true},
		"excluded": {nodes: four(func(*corev1.Node) {}), job: llama(), exclude: []string{"node-1"}},
		"selector": {nodes: four(func(n *corev1.Node) { n.Labels["gpu"] = "a100" }),
			job: llama().NodeSelector("gpu", "h100")},
		"too big for any node": {nodes: four(func(*corev1.Node) {}), job: schemastest.Job("big").Workspace("nlp").
			Role("worker", 1).GPUs(16),
			want: "replica worker-0 needs nvidia.com/gpu 16, more than any of the 4 nodes it may use in pool quota has: " +
				"nvidia.com/gpu 16 (8 on each node)"},
		"mixed roles over the total": {nodes: four(func(*corev1.Node) {}),
			job: schemastest.Job("mixed").Workspace("nlp").Role("master", 1).GPUs(4).Role("worker", 4).GPUs(8),
			want: "5 replicas (master: 1, worker: 4) need more than the 4 nodes they may use in pool quota hold; " +
				"short of nvidia.com/gpu: 36 needed, 32 allocatable (8 on each node)"},
	} {
		t.Run(name, func(t *testing.T) {
			cs := newClient()
			createNodes(t, cs, tc.nodes...)
			b := newBackend(t, cs)
			g := gangOf(t, tc.job)
			g.ExcludeNodes = tc.exclude
			err := b.Launch(context.Background(), g)
			if tc.fits {
				if err != nil {
					t.Fatalf("Launch: %v", err)
				}
				return
			}
			if !errors.Is(err, backend.ErrUnschedulable) {
				t.Fatalf("Launch: %v, want ErrUnschedulable", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q\nlacks %q", err, tc.want)
			}
			if n := len(pods(t, cs, "nlp")); n != 0 {
				t.Errorf("%d pods created", n)
			}
		})
	}
}

// A pool marked autoscaled gets its pods whatever the present nodes hold: its nodes
// come for pending pods. A gang launched before (its Service exists) is not checked
// again.
func TestLaunchLeavesAutoscaledPoolsAndLaunchedGangsAlone(t *testing.T) {
	cs := newClient()
	createNodes(t, cs, gpuNode("node-0", 8))
	b := newBackend(t, cs, WithPool(schemas.PoolPublic, PoolConfig{Autoscaled: true}))
	launch(t, b, gangOf(t, llama().Pool(schemas.PoolPublic)))
	if n := len(pods(t, cs, "nlp")); n != 4 {
		t.Errorf("%d pods in the autoscaled pool, want 4", n)
	}

	// The quota pool's gang was launched by an earlier call (its Service exists): a
	// retried Launch completes it.
	cs = newClient()
	b = newBackend(t, cs)
	g := gangOf(t, llama())
	launch(t, b, g)
	createNodes(t, cs, gpuNode("node-0", 8))
	testutil.Eventually(t, 10*time.Second, "the node in the cache", func() bool {
		nodes, err := b.nodes.list(context.Background())
		return err == nil && len(nodes) == 1
	})
	launch(t, b, g)
}

// Each pool has its placement timeout: the default, its own, or none.
func TestPlacementTimeoutPerPool(t *testing.T) {
	b, err := New(newClient(),
		WithPool(schemas.PoolPublic, PoolConfig{PlacementTimeout: 90 * time.Second}),
		WithPool(schemas.PoolSpot, PoolConfig{PlacementTimeout: -1}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for pool, want := range map[schemas.Pool]time.Duration{
		schemas.PoolQuota: backend.DefaultPlacementTimeout, "": backend.DefaultPlacementTimeout,
		schemas.PoolPublic: 90 * time.Second, schemas.PoolSpot: 0,
	} {
		if got := backend.PlacementTimeoutFor(b, pool); got != want {
			t.Errorf("pool %q: %s, want %s", pool, got, want)
		}
	}
}

// Many nodes of different sizes are summed up, not all listed.
func TestCannotFitMessageListsFewNodes(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 6 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("node-%d", i), int64(1+i%2)))
	}
	g := gangOf(t, schemastest.Job("wide").Workspace("nlp").Role("worker", 10).GPUs(1))
	b, err := New(newClient())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pods := make([]*corev1.Pod, len(g.Replicas))
	for i, r := range g.Replicas {
		pods[i] = b.podFor(g, r, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "wide-a1", Namespace: "nlp"}}, nil, nil, gangMounts{})
	}
	msg := cannotFit(pods, nodes, "quota")
	want := "nvidia.com/gpu: 10 needed, 9 allocatable (1 on node-0, 2 on node-1, 1 on node-2, 2 on node-3, 2 more)"
	if !strings.Contains(msg, want) || !strings.Contains(msg, "have room for 9") {
		t.Errorf("message %q\nlacks %q", msg, want)
	}
}

// Several excluded nodes: each is a matchFields requirement of its own (the API server
// takes one value per metadata.name requirement), so the nodes left are still usable
// and every pod's affinity holds every excluded node.
func TestLaunchExcludesSeveralNodes(t *testing.T) {
	cs := newClient()
	createNodes(t, cs, gpuNode("node-0", 8), gpuNode("node-1", 8), gpuNode("node-2", 8), gpuNode("node-3", 8), gpuNode("node-4", 8), gpuNode("node-5", 8))
	b := newBackend(t, cs)
	g := gangOf(t, llama())
	g.ExcludeNodes = []string{"node-1", "node-3"}
	launch(t, b, g)
	got := pods(t, cs, "nlp")
	if len(got) != 4 {
		t.Fatalf("%d pods, want 4", len(got))
	}
	for _, p := range got {
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchFields) != 2 {
			t.Fatalf("pod %s affinity terms %+v, want one term of two requirements", p.Name, terms)
		}
		for i, want := range g.ExcludeNodes {
			r := terms[0].MatchFields[i]
			if r.Key != "metadata.name" || r.Operator != corev1.NodeSelectorOpNotIn || len(r.Values) != 1 || r.Values[0] != want {
				t.Errorf("pod %s requirement %d %+v, want metadata.name NotIn [%s]", p.Name, i, r, want)
			}
		}
		ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}})
		if !ok || err != nil {
			t.Errorf("pod %s does not match node-0: %v", p.Name, err)
		}
	}
}
