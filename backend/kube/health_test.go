package kube

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// nodeBuilder builds a fake node: Ready, schedulable, 8 GPUs all allocatable.
type nodeBuilder struct{ n corev1.Node }

func testNode(name string) *nodeBuilder {
	gpus := resource.MustParse("8")
	return &nodeBuilder{n: corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{ResourceGPU: gpus},
			Allocatable: corev1.ResourceList{ResourceGPU: gpus},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}}
}

func (b *nodeBuilder) gpus(capacity, allocatable int64) *nodeBuilder {
	b.n.Status.Capacity[ResourceGPU] = *resource.NewQuantity(capacity, resource.DecimalSI)
	b.n.Status.Allocatable[ResourceGPU] = *resource.NewQuantity(allocatable, resource.DecimalSI)
	return b
}

func (b *nodeBuilder) notReady() *nodeBuilder {
	b.n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
		Reason: "KubeletNotReady", Message: "container runtime is down"}
	return b
}

func (b *nodeBuilder) cordoned() *nodeBuilder { b.n.Spec.Unschedulable = true; return b }

func (b *nodeBuilder) label(k, v string) *nodeBuilder { b.n.Labels[k] = v; return b }

func (b *nodeBuilder) taint(k, v string, e corev1.TaintEffect) *nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: e})
	return b
}

// quarantined marks the node as quarantined at, after count failed checks, the last at
// checked.
func (b *nodeBuilder) quarantined(at, checked time.Time, count int, by string) *nodeBuilder {
	b.taint(TaintQuarantined, "true", corev1.TaintEffectNoSchedule)
	b.n.Labels[LabelQuarantined] = "true"
	b.n.Annotations = map[string]string{
		AnnotationQuarantineReason:    "ProbeFailed: check pod failed",
		AnnotationQuarantinedAt:       at.Format(time.RFC3339),
		AnnotationQuarantineCheckedAt: checked.Format(time.RFC3339),
		AnnotationQuarantineCount:     strconv.Itoa(count),
		AnnotationQuarantinedBy:       by,
	}
	return b
}

func (b *nodeBuilder) obj() *corev1.Node { return b.n.DeepCopy() }

// fakeKubelet finishes every check pod as soon as it is created, in the phase (and
// container state) outcome gives for its node: Succeeded unless told otherwise. It
// records the check pods created.
type fakeKubelet struct {
	mu      sync.Mutex
	outcome map[string]corev1.PodStatus // by node
	created []*corev1.Pod
}

func (k *fakeKubelet) install(cs *fake.Clientset) {
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Labels[LabelHealthCheck] == "" {
			return false, nil, nil
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		k.created = append(k.created, p.DeepCopy())
		st, ok := k.outcome[p.Spec.NodeName]
		if !ok {
			st = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}
		}
		p.Status = st
		return false, nil, nil
	})
}

func (k *fakeKubelet) pods() []*corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.created)
}

func probeFailed(msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: msg}}}}}
}

func waiting(reason string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "back-off pulling image"}}}}}
}

var healthT0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// newHealthBackend returns a backend on cs whose quarantine clock reads now().
func newHealthBackend(t *testing.T, cs *fake.Clientset, now func() time.Time, opts ...Option) *Backend {
	t.Helper()
	b := newBackend(t, cs, opts...)
	b.health.now = now
	return b
}

func getNode(t *testing.T, cs *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// quarantineState is what a test compares of a node's quarantine.
type quarantineState struct {
	Tainted     bool
	Labelled    bool
	Annotations map[string]string
	OtherTaints []string
}

func stateOf(n *corev1.Node) quarantineState {
	s := quarantineState{Labelled: n.Labels[LabelQuarantined] == "true", Annotations: map[string]string{}}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintQuarantined && t.Value == "true" && t.Effect == corev1.TaintEffectNoSchedule {
			s.Tainted = true
		} else {
			s.OtherTaints = append(s.OtherTaints, t.Key)
		}
	}
	maps.Copy(s.Annotations, n.Annotations)
	return s
}

func verdicts(nodes []backend.NodeHealth) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		v := n.Reason
		if n.Healthy {
			v = "healthy"
		}
		if n.Quarantined {
			v += ", quarantined"
		}
		out[n.Node] = v
	}
	return out
}

// The candidate nodes of a job are those its pool's selector matches on which at least
// one role's selector, tolerations and GPU needs fit; taints that report a node's ill
// health and the quarantine taint do not take a node out (the check judges them).
func TestHealthCandidateNodes(t *testing.T) {
	spot := PoolConfig{
		NodeSelector: map[string]string{"opendlc.io/spot": "true"},
		Tolerations:  []corev1.Toleration{{Key: "opendlc.io/spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	b, err := New(newClient(), WithPool(schemas.PoolSpot, spot))
	if err != nil {
		t.Fatal(err)
	}
	gpuJob := schemastest.Job("j").GPUs(8)
	tests := map[string]struct {
		node    *corev1.Node
		job     *schemastest.JobBuilder
		exclude []string
		want    bool
	}{
		"a GPU node for a GPU job":       {node: testNode("n").obj(), job: gpuJob, want: true},
		"a CPU node for a GPU job":       {node: testNode("n").gpus(0, 0).obj(), job: gpuJob},
		"a CPU node for a CPU job":       {node: testNode("n").gpus(0, 0).obj(), job: schemastest.Job("j"), want: true},
		"one role of two fits":           {node: testNode("n").gpus(0, 0).obj(), job: schemastest.Job("j").GPUs(8).Role("ps", 1), want: true},
		"the role's selector matches":    {node: testNode("n").label("gpu", "h100").obj(), job: schemastest.Job("j").NodeSelector("gpu", "h100"), want: true},
		"the role's selector differs":    {node: testNode("n").label("gpu", "a100").obj(), job: schemastest.Job("j").NodeSelector("gpu", "h100")},
		"an untolerated taint":           {node: testNode("n").taint("dedicated", "infer", corev1.TaintEffectNoSchedule).obj(), job: gpuJob},
		"a tolerated taint":              {node: testNode("n").taint("dedicated", "infer", corev1.TaintEffectNoExecute).obj(), job: schemastest.Job("j").Toleration(schemas.Toleration{Key: "dedicated", Operator: "Equal", Value: "infer", Effect: "NoExecute"}), want: true},
		"a taint of another value":       {node: testNode("n").taint("dedicated", "train", corev1.TaintEffectNoSchedule).obj(), job: schemastest.Job("j").Toleration(schemas.Toleration{Key: "dedicated", Value: "infer"})},
		"a PreferNoSchedule taint":       {node: testNode("n").taint("dedicated", "x", corev1.TaintEffectPreferNoSchedule).obj(), job: gpuJob, want: true},
		"a not-ready taint":              {node: testNode("n").notReady().taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute).obj(), job: gpuJob, want: true},
		"the quarantine taint":           {node: testNode("n").quarantined(healthT0, healthT0, 1, "x").obj(), job: gpuJob, want: true},
		"a spot node outside spot":       {node: testNode("n").label("opendlc.io/spot", "true").taint("opendlc.io/spot", "", corev1.TaintEffectNoSchedule).obj(), job: gpuJob},
		"a spot node in spot":            {node: testNode("n").label("opendlc.io/spot", "true").taint("opendlc.io/spot", "", corev1.TaintEffectNoSchedule).obj(), job: schemastest.Job("j").GPUs(8).Pool(schemas.PoolSpot), want: true},
		"a plain node in spot":           {node: testNode("n").obj(), job: schemastest.Job("j").Pool(schemas.PoolSpot)},
		"a tolerate-everything job role": {node: testNode("n").taint("a", "b", corev1.TaintEffectNoSchedule).obj(), job: schemastest.Job("j").Toleration(schemas.Toleration{Operator: "Exists"}), want: true},
		"a node the affinity keeps off":  {node: testNode("n").obj(), job: gpuJob, exclude: []string{"n"}},
		"a node the affinity allows":     {node: testNode("n").obj(), job: gpuJob, exclude: []string{"other"}, want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			job := tt.job.Obj()
			in := backend.CheckNodesInput{Ref: backend.GangRef{Workspace: "ws", Job: "j"}, Job: *job, Exclude: tt.exclude}
			got, err := b.candidates(in, job.Spec.Resources.Pool, []*corev1.Node{tt.node})
			if err != nil {
				t.Fatal(err)
			}
			if got[tt.node.Name] != tt.want {
				t.Errorf("candidate = %v, want %v", got[tt.node.Name], tt.want)
			}
		})
	}
}

// A pre-flight check reports every candidate, probes those whose status is sound with a
// pod bound to the node, quarantines the unhealthy ones (but not a cordoned node, one
// whose probe could not start, or one quarantined already), and deletes its pods.
func TestCheckNodesQuarantinesUnhealthyNodes(t *testing.T) {
	nodes := []runtime.Object{
		testNode("a-healthy").obj(),
		testNode("b-healthy").obj(),
		testNode("c-healthy").obj(),
		testNode("d-not-ready").notReady().obj(),
		testNode("e-gpus-lost").gpus(8, 7).obj(),
		testNode("f-probe-fails").obj(),
		testNode("g-cordoned").cordoned().obj(),
		testNode("h-quarantined").quarantined(healthT0.Add(-time.Hour), healthT0.Add(-time.Hour), 2, "other.job.a0").obj(),
		testNode("i-excluded").notReady().obj(),
		testNode("j-cpu-only").gpus(0, 0).obj(),
		testNode("k-probe-not-started").obj(),
		testNode("l-healthy").taint("other", "x", corev1.TaintEffectNoExecute).obj(), // not a candidate: untolerated
		testNode("m-healthy").obj(),
	}
	cs := newClient(nodes...)
	kubelet := &fakeKubelet{outcome: map[string]corev1.PodStatus{
		"f-probe-fails":       probeFailed("nvidia-smi lists 7 of the node's 8 GPUs"),
		"k-probe-not-started": waiting("ImagePullBackOff"),
	}}
	kubelet.install(cs)
	b := newHealthBackend(t, cs, func() time.Time { return healthT0 },
		WithHealthProbeAnnotations(map[string]string{"kwok.opendlc.io/complete-after": "1s"}),
		WithPodAnnotations(map[string]string{"training-only": "yes"}))
	job := schemastest.Job("llama").Workspace("vision").GPUs(8).Obj()
	ref := backend.GangRef{Workspace: "vision", Job: "llama", Attempt: 2}

	res, err := b.CheckNodes(context.Background(), backend.CheckNodesInput{
		Ref: ref, Job: *job, Exclude: []string{"i-excluded"}, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("CheckNodes: %v", err)
	}
	want := map[string]string{
		"a-healthy": "healthy", "b-healthy": "healthy", "c-healthy": "healthy", "m-healthy": "healthy",
		"d-not-ready":         "NodeNotReady, quarantined",
		"e-gpus-lost":         "GPUsLost, quarantined",
		"f-probe-fails":       "ProbeFailed, quarantined",
		"g-cordoned":          "Cordoned",
		"h-quarantined":       "Quarantined, quarantined",
		"k-probe-not-started": "ProbeNotStarted",
	}
	if diff := cmp.Diff(want, verdicts(res.Nodes)); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if !sort.SliceIsSorted(res.Nodes, func(i, j int) bool { return res.Nodes[i].Node < res.Nodes[j].Node }) {
		t.Errorf("nodes not sorted: %v", res.Nodes)
	}
	if diff := cmp.Diff([]string{"d-not-ready", "e-gpus-lost", "f-probe-fails"}, res.Quarantined); diff != "" {
		t.Errorf("quarantined (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d-not-ready", "e-gpus-lost", "f-probe-fails", "g-cordoned", "h-quarantined", "k-probe-not-started"},
		res.Unhealthy()); diff != "" {
		t.Errorf("unhealthy (-want +got):\n%s", diff)
	}
	for _, n := range res.Nodes {
		switch n.Node {
		case "f-probe-fails":
			if n.Message != "check pod llama-check-a2-"+nodeHash("f-probe-fails")+" failed: exit code 1: Error: nvidia-smi lists 7 of the node's 8 GPUs" {
				t.Errorf("probe failure message %q", n.Message)
			}
		case "e-gpus-lost":
			if n.Message != "allocatable 7 of 8 nvidia.com/gpu: GPUs lost" {
				t.Errorf("GPU message %q", n.Message)
			}
		case "a-healthy":
			var names []string
			for _, c := range n.Checks {
				if !c.OK {
					t.Errorf("a-healthy: check %+v failed", c)
				}
				names = append(names, c.Name)
			}
			if diff := cmp.Diff([]string{"Ready", "Schedulable", "GPUs", "Probe"}, names); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
		}
	}

	// The quarantined nodes carry the taint, the label and the annotations; the
	// others are untouched.
	at := healthT0.Format(time.RFC3339)
	for _, name := range res.Quarantined {
		got := stateOf(getNode(t, cs, name))
		wantState := quarantineState{Tainted: true, Labelled: true, Annotations: map[string]string{
			AnnotationQuarantinedAt: at, AnnotationQuarantineCheckedAt: at, AnnotationQuarantineCount: "1",
			AnnotationQuarantinedBy: "vision.llama.a2",
		}}
		if diff := cmp.Diff(wantState, got, cmpopts.IgnoreMapEntries(func(k, _ string) bool { return k == AnnotationQuarantineReason })); diff != "" {
			t.Errorf("node %s (-want +got):\n%s", name, diff)
		}
		if got.Annotations[AnnotationQuarantineReason] == "" {
			t.Errorf("node %s: no reason annotation", name)
		}
	}
	for _, name := range []string{"a-healthy", "g-cordoned", "i-excluded", "k-probe-not-started"} {
		if got := stateOf(getNode(t, cs, name)); got.Tainted || got.Labelled {
			t.Errorf("node %s quarantined: %+v", name, got)
		}
	}
	if got := getNode(t, cs, "h-quarantined").Annotations[AnnotationQuarantinedBy]; got != "other.job.a0" {
		t.Errorf("an earlier quarantine was overwritten: by %q", got)
	}

	// One check pod per probed node, bound to it, deleted afterwards.
	var probed []string
	for _, p := range kubelet.pods() {
		probed = append(probed, p.Spec.NodeName)
		if p.Name != jobCheckPodName(ref, p.Spec.NodeName) || p.Namespace != "vision" {
			t.Errorf("check pod %s/%s for node %s", p.Namespace, p.Name, p.Spec.NodeName)
		}
		if p.Annotations["kwok.opendlc.io/complete-after"] != "1s" || p.Annotations["training-only"] != "" ||
			p.Annotations[AnnotationNode] != p.Spec.NodeName {
			t.Errorf("check pod %s annotations %v", p.Name, p.Annotations)
		}
		if diff := cmp.Diff([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, p.Spec.Tolerations); diff != "" {
			t.Errorf("check pod %s tolerations (-want +got):\n%s", p.Name, diff)
		}
		if len(p.Spec.Containers) != 1 || len(p.Spec.Containers[0].Resources.Requests) != 0 ||
			p.Labels[LabelGang] != "" || p.Labels[LabelJob] != "" || p.Labels[LabelCheckGang] != "vision.llama.a2" {
			t.Errorf("check pod %s: containers %+v, labels %v", p.Name, p.Spec.Containers, p.Labels)
		}
		if env := envMap(p.Spec.Containers[0].Env); env["DLC_NODE"] != p.Spec.NodeName || env["DLC_NODE_GPUS"] != "8" || env["NVIDIA_VISIBLE_DEVICES"] != "all" {
			t.Errorf("check pod %s env %v", p.Name, env)
		}
	}
	sort.Strings(probed)
	if diff := cmp.Diff([]string{"a-healthy", "b-healthy", "c-healthy", "f-probe-fails", "k-probe-not-started", "m-healthy"}, probed); diff != "" {
		t.Errorf("probed nodes (-want +got):\n%s", diff)
	}
	if left := pods(t, cs, "vision"); len(left) != 0 {
		t.Errorf("check pods left: %v", left)
	}
}

// The nodes a check probes and counts are those the job's pods may use, node affinity
// included: the job's pods are kept off the excluded nodes by a required node
// affinity (as Launch builds them), and the check goes by the same pods. Excluded
// nodes are neither probed nor counted towards "too many failed at once": here two of
// three failing nodes are excluded, so the one left is quarantined.
func TestCheckNodesHonoursNodeAffinity(t *testing.T) {
	cs := newClient(
		testNode("a-healthy").obj(),
		testNode("b-probe-fails").obj(),
		testNode("c-excluded").obj(),
		testNode("d-excluded").obj(),
	)
	failed := probeFailed("nvidia-smi lists 7 of the node's 8 GPUs")
	kubelet := &fakeKubelet{outcome: map[string]corev1.PodStatus{"b-probe-fails": failed, "c-excluded": failed, "d-excluded": failed}}
	kubelet.install(cs)
	b := newHealthBackend(t, cs, func() time.Time { return healthT0 })
	in := backend.CheckNodesInput{
		Ref: backend.GangRef{Workspace: "ws", Job: "j"}, Job: *schemastest.Job("j").Workspace("ws").GPUs(8).Obj(),
		Exclude: []string{"c-excluded", "d-excluded"}, Timeout: 5 * time.Second,
	}
	g, err := backend.BuildGang(&in.Job, backend.GangParams{Ref: in.Ref, ExcludeNodes: in.Exclude})
	if err != nil {
		t.Fatal(err)
	}
	pod := b.podFor(g, g.Replicas[0], &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ws"}}, nil, nil, gangMounts{})
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("the job's pod has no required node affinity keeping it off the excluded nodes: %+v", pod.Spec.Affinity)
	}

	res, err := b.CheckNodes(context.Background(), in)
	if err != nil {
		t.Fatalf("CheckNodes: %v", err)
	}
	want := map[string]string{"a-healthy": "healthy", "b-probe-fails": "ProbeFailed, quarantined"}
	if diff := cmp.Diff(want, verdicts(res.Nodes)); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b-probe-fails"}, res.Quarantined); diff != "" {
		t.Errorf("quarantined (-want +got):\n%s", diff)
	}
	var probed []string
	for _, p := range kubelet.pods() {
		probed = append(probed, p.Spec.NodeName)
	}
	sort.Strings(probed)
	if diff := cmp.Diff([]string{"a-healthy", "b-probe-fails"}, probed); diff != "" {
		t.Errorf("probed nodes (-want +got):\n%s", diff)
	}
	for _, name := range in.Exclude {
		if n := getNode(t, cs, name); quarantined(n) {
			t.Errorf("%s, kept off by the job's node affinity, was quarantined", name)
		}
	}
}

// A check retried after it quarantined nodes (a worker crash before the activity
// returned) reports the same quarantine and changes nothing.
func TestCheckNodesRetryIsIdempotent(t *testing.T) {
	cs := newClient(testNode("a").obj(), testNode("b").obj(), testNode("c").obj(), testNode("d").gpus(8, 6).obj())
	(&fakeKubelet{}).install(cs)
	now := healthT0
	b := newHealthBackend(t, cs, func() time.Time { return now })
	in := backend.CheckNodesInput{
		Ref: backend.GangRef{Workspace: "ws", Job: "j", Attempt: 0}, Job: *schemastest.Job("j").Workspace("ws").GPUs(1).Obj(),
		Timeout: 5 * time.Second,
	}
	first, err := b.CheckNodes(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	before := getNode(t, cs, "d")
	cs.ClearActions()
	now = now.Add(time.Minute)
	second, err := b.CheckNodes(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d"}, second.Quarantined); diff != "" {
		t.Errorf("retry's quarantined (-want +got):\n%s", diff)
	}
	opts := cmpopts.IgnoreFields(backend.NodeHealth{}, "CheckedAt", "Checks", "Message")
	if diff := cmp.Diff(first, second, opts); diff != "" {
		t.Errorf("retry differs (-first +second):\n%s", diff)
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "nodes" && a.GetVerb() == "patch" {
			t.Errorf("the retry patched node %v", a)
		}
	}
	if diff := cmp.Diff(stateOf(before), stateOf(getNode(t, cs, "d"))); diff != "" {
		t.Errorf("node d changed (-before +after):\n%s", diff)
	}
	// Quarantining an already quarantined node directly changes nothing either.
	h, mine, err := b.quarantine(context.Background(), "d", backend.NodeHealth{Node: "d", Reason: "X"}, "another.check.a1")
	if err != nil || mine || !h.Quarantined || h.QuarantinedAt == nil || !h.QuarantinedAt.Equal(healthT0) {
		t.Errorf("quarantine again: %+v mine=%v %v", h, mine, err)
	}
	if diff := cmp.Diff(stateOf(before), stateOf(getNode(t, cs, "d"))); diff != "" {
		t.Errorf("node d changed by a second quarantine (-before +after):\n%s", diff)
	}
}

// When more than half the checked nodes fail at once, the check is suspect: the nodes
// are reported unhealthy but not quarantined.
func TestCheckNodesDoesNotQuarantineMostNodesAtOnce(t *testing.T) {
	cs := newClient(testNode("a").obj(), testNode("b").obj(), testNode("c").obj())
	(&fakeKubelet{outcome: map[string]corev1.PodStatus{"a": probeFailed("no GPUs"), "b": probeFailed("no GPUs")}}).install(cs)
	b := newHealthBackend(t, cs, func() time.Time { return healthT0 })
	res := checkJobNodes(t, b, 5*time.Second, map[string]string{"a": "ProbeFailed", "b": "ProbeFailed", "c": "healthy"})
	if len(res.Quarantined) != 0 {
		t.Errorf("quarantined %v", res.Quarantined)
	}
	for _, name := range []string{"a", "b"} {
		if s := stateOf(getNode(t, cs, name)); s.Tainted || s.Labelled {
			t.Errorf("node %s quarantined", name)
		}
	}
}

// A check pod that does not finish in time makes its node unhealthy (ProbeTimeout).
func TestCheckNodesProbeTimeout(t *testing.T) {
	cs := newClient(testNode("a").obj(), testNode("b").obj(), testNode("c").obj())
	(&fakeKubelet{outcome: map[string]corev1.PodStatus{"b": waiting("ContainerCreating")}}).install(cs)
	b := newHealthBackend(t, cs, func() time.Time { return healthT0 })
	res := checkJobNodes(t, b, 300*time.Millisecond, map[string]string{"a": "healthy", "b": "ProbeTimeout, quarantined", "c": "healthy"})
	if got := res.Nodes[1].Message; got != "check pod j-check-a0-"+nodeHash("b")+" did not finish within 300ms: phase Pending, ContainerCreating: back-off pulling image" {
		t.Errorf("message %q", got)
	}
}

func TestQuarantineBackoff(t *testing.T) {
	tests := map[string]struct {
		opts []Option
		want []time.Duration // for counts 1, 2, 3...
	}{
		"default": {want: []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
			16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}},
		"custom": {opts: []Option{WithQuarantineBackoff(10*time.Second, 30*time.Second)},
			want: []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}},
		"zero": {opts: []Option{WithQuarantineBackoff(0, 0)}, want: []time.Duration{0, 0}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := New(newClient(), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Duration
			for i := range tt.want {
				got = append(got, b.quarantineBackoff(i+1))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("backoffs (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := New(newClient(), WithQuarantineBackoff(time.Minute, time.Second)); err == nil {
		t.Error("a max below the base was accepted")
	}
}

// RecheckQuarantined probes the quarantined nodes whose backoff has passed, releases the
// healthy ones (keeping their other taints) and lengthens the others' backoff; nodes
// not due are left alone, and a second round right after does nothing.
func TestRecheckQuarantinedReleasesHealthyNodesAfterBackoff(t *testing.T) {
	now := healthT0
	cs := newClient(
		// Due (1m after a first failure), and healthy now.
		testNode("a-recovered").quarantined(now.Add(-2*time.Minute), now.Add(-2*time.Minute), 1, "x").taint("keep", "me", corev1.TaintEffectNoSchedule).obj(),
		// Due (4m after a third failure), still failing its probe.
		testNode("b-still-bad").quarantined(now.Add(-time.Hour), now.Add(-5*time.Minute), 3, "x").obj(),
		// Not due: 8m after a fourth failure, checked 5m ago.
		testNode("c-not-due").quarantined(now.Add(-time.Hour), now.Add(-5*time.Minute), 4, "x").obj(),
		// Due, and NotReady: no probe.
		testNode("d-not-ready").quarantined(now.Add(-time.Hour), now.Add(-time.Hour), 1, "x").notReady().obj(),
		testNode("e-never-quarantined").obj(),
	)
	kubelet := &fakeKubelet{outcome: map[string]corev1.PodStatus{"b-still-bad": probeFailed("disk full")}}
	kubelet.install(cs)
	b := newHealthBackend(t, cs, func() time.Time { return now }, WithHealthNamespace("dlc-health"))

	got, err := b.RecheckQuarantined(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatalf("RecheckQuarantined: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"a-recovered": "healthy", "b-still-bad": "ProbeFailed, quarantined", "d-not-ready": "NodeNotReady, quarantined"},
		verdicts(got)); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	for _, h := range got {
		if h.Node == "a-recovered" && (h.QuarantinedAt == nil || !h.QuarantinedAt.Equal(now.Add(-2*time.Minute))) {
			t.Errorf("released node's quarantine start %v", h.QuarantinedAt)
		}
	}
	if diff := cmp.Diff(quarantineState{Annotations: map[string]string{}, OtherTaints: []string{"keep"}}, stateOf(getNode(t, cs, "a-recovered"))); diff != "" {
		t.Errorf("released node (-want +got):\n%s", diff)
	}
	b2 := stateOf(getNode(t, cs, "b-still-bad"))
	if !b2.Tainted || !b2.Labelled || b2.Annotations[AnnotationQuarantineCount] != "4" ||
		b2.Annotations[AnnotationQuarantineCheckedAt] != now.Format(time.RFC3339) ||
		b2.Annotations[AnnotationQuarantinedAt] != now.Add(-time.Hour).Format(time.RFC3339) ||
		b2.Annotations[AnnotationQuarantineReason] != "ProbeFailed: check pod recheck-"+nodeHash("b-still-bad")+"-3 failed: exit code 1: Error: disk full" {
		t.Errorf("node still bad: %+v", b2)
	}
	if c := stateOf(getNode(t, cs, "c-not-due")); c.Annotations[AnnotationQuarantineCount] != "4" {
		t.Errorf("node not due was re-checked: %+v", c)
	}
	var probed []string
	for _, p := range kubelet.pods() {
		probed = append(probed, p.Namespace+"/"+p.Name)
	}
	sort.Strings(probed)
	if diff := cmp.Diff([]string{"dlc-health/" + recheckPodName("a-recovered", 1), "dlc-health/" + recheckPodName("b-still-bad", 3)}, probed); diff != "" {
		t.Errorf("check pods (-want +got):\n%s", diff)
	}
	if left := pods(t, cs, "dlc-health"); len(left) != 0 {
		t.Errorf("check pods left: %v", left)
	}

	// Right after, nothing is due: b waits 8m now, d 2m.
	again, err := b.RecheckQuarantined(context.Background(), 5*time.Second)
	if err != nil || len(again) != 0 {
		t.Errorf("second round: %v, %v; want nothing re-checked", again, err)
	}
	// After 2m, d is due again (and still NotReady), b is not.
	now = now.Add(2 * time.Minute)
	again, err = b.RecheckQuarantined(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"d-not-ready": "NodeNotReady, quarantined"}, verdicts(again)); diff != "" {
		t.Errorf("third round (-want +got):\n%s", diff)
	}
	// Releasing a node that is not quarantined changes nothing.
	cs.ClearActions()
	if _, err := b.release(context.Background(), "e-never-quarantined", backend.NodeHealth{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("release of a healthy node patched it: %v", a)
		}
	}
}

// Check pods that outlived their check by long are swept by the re-check round.
func TestRecheckSweepsOldCheckPods(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	deadline := int64(60)
	stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-check-a0-x", Namespace: "ws", CreationTimestamp: old,
		Labels: map[string]string{LabelHealthCheck: "job", LabelManagedBy: ManagedByValue}},
		Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}
	fresh := stale.DeepCopy()
	fresh.Name, fresh.CreationTimestamp = "j-check-a1-x", metav1.NewTime(time.Now())
	unrelated := stale.DeepCopy()
	unrelated.Name, unrelated.Labels = "someone-elses", map[string]string{LabelHealthCheck: "job"}
	cs := newClient(stale, fresh, unrelated)
	b := newBackend(t, cs)
	if _, err := b.RecheckQuarantined(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	var left []string
	for name := range pods(t, cs, "ws") {
		left = append(left, name)
	}
	sort.Strings(left)
	if diff := cmp.Diff([]string{"j-check-a1-x", "someone-elses"}, left); diff != "" {
		t.Errorf("pods left (-want +got):\n%s", diff)
	}
}

// checkAndRecheckNodes runs a health check that quarantines a node, and a re-check that
// releases it: every node request the health checks make (TestPolicyRulesCoverEveryRequest).
func checkAndRecheckNodes(t *testing.T, cs *fake.Clientset, b *Backend) {
	t.Helper()
	ctx := context.Background()
	if err := cs.Tracker().Add(testNode("node-ok").obj()); err != nil {
		t.Fatal(err)
	}
	if err := cs.Tracker().Add(testNode("node-bad").gpus(8, 4).obj()); err != nil {
		t.Fatal(err)
	}
	(&fakeKubelet{}).install(cs)
	res, err := b.CheckNodes(ctx, backend.CheckNodesInput{
		Ref: backend.GangRef{Workspace: "vision", Job: "check", Attempt: 0}, Job: *schemastest.Job("check").Workspace("vision").Obj(),
		Timeout: 5 * time.Second,
	})
	if err != nil || !slices.Equal(res.Quarantined, []string{"node-bad"}) {
		t.Fatalf("CheckNodes: %+v, %v", res, err)
	}
	n := getNode(t, cs, "node-bad")
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
		t.Fatal(err)
	}
	b.health.backoff, b.health.maxBackoff, b.health.backoffSet = 0, 0, true
	got, err := b.RecheckQuarantined(ctx, 5*time.Second)
	if err != nil || len(got) != 1 || !got[0].Healthy {
		t.Fatalf("RecheckQuarantined: %+v, %v", got, err)
	}
}

// checkJobNodes checks the nodes for job ws/j with the given timeout, checks the
// verdicts against want (see verdicts) and returns the result.
func checkJobNodes(t *testing.T, b *Backend, timeout time.Duration, want map[string]string) backend.CheckNodesResult {
	t.Helper()
	res, err := b.CheckNodes(context.Background(), backend.CheckNodesInput{
		Ref: backend.GangRef{Workspace: "ws", Job: "j"}, Job: *schemastest.Job("j").Workspace("ws").Obj(), Timeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, verdicts(res.Nodes)); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	return res
}
