package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// These tests run the kubernetes backend in the test process, as the worker's service
// account with deploy/rbac.yaml and deploy/rbac-batchsched.yaml, against the test
// control plane with the batch schedulers' pieces added: scheduler-plugins'
// Coscheduling as a second scheduler, Kueue's CRDs and a Volcano PodGroup CRD.

// batchLabel marks (and taints) the nodes the coscheduling test adds, so no other
// test's pod lands there and its gang lands nowhere else.
const batchLabel = "opendlc.io/batchsched-test"

var batchOnce struct {
	sync.Once
	err error
}

// setupBatchSchedulers adds the batch schedulers' pieces to the shared control plane,
// once: the coscheduler (built on first use: minutes), the CRDs, and the worker's
// rights on PodGroups.
func setupBatchSchedulers(t *testing.T, ctx context.Context) {
	t.Helper()
	batchOnce.Do(func() {
		c := env.cluster
		if batchOnce.err = applyManifest(ctx, c.Client, "../../deploy/rbac-batchsched.yaml"); batchOnce.err != nil {
			return
		}
		if batchOnce.err = c.InstallVolcanoCRDs(ctx); batchOnce.err != nil {
			return
		}
		if batchOnce.err = c.InstallKueueCRDs(ctx); batchOnce.err != nil {
			return
		}
		batchOnce.err = c.StartCoscheduler(ctx, kubestack.CoschedulerOptions{PermitWaiting: 5 * time.Second})
	})
	if batchOnce.err != nil {
		t.Fatalf("batch schedulers: %v", batchOnce.err)
	}
}

// batchBackend is a kubernetes backend as the worker's identity, with opts.
func batchBackend(t *testing.T, opts ...kube.Option) *kube.Backend {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(env.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kube.New(cs, append([]kube.Option{kube.WithDynamicClient(dc), kube.WithStopGracePeriod(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// adminDynamic reads the custom resources as the cluster's admin.
func adminDynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(env.cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func gangFor(t *testing.T, job *schemastest.JobBuilder) backend.GangSpec {
	t.Helper()
	j := job.Obj()
	g, err := backend.BuildGang(j, backend.GangParams{Ref: backend.GangRef{Workspace: j.Metadata.Workspace, Job: j.Metadata.Name, Attempt: 1}, UID: "uid-" + j.Metadata.Name})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// unschedulable reports whether the scheduler has tried pod and found no place for it.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// A gang handed to scheduler-plugins' Coscheduling binds no pod while it does not fit
// whole, even though one of its pods would fit alone, and binds whole once a node is
// added.
func TestCoschedulingBindsWholeGangOnly(t *testing.T) {
	ctx := itest.Context(t, 20*time.Minute) // the first run builds the coscheduler
	setupBatchSchedulers(t, ctx)
	c := env.cluster
	taint := corev1.Taint{Key: batchLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	nodes := []string{"kwok-batch-0", "kwok-batch-1"}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = c.DeleteNode(context.Background(), n)
		}
	})
	if err := c.AddNode(ctx, nodes[0], map[string]string{batchLabel: "true"}, taint); err != nil {
		t.Fatal(err)
	}
	b := batchBackend(t,
		kube.WithPool(schemas.PoolPublic, kube.PoolConfig{
			NodeSelector: map[string]string{batchLabel: "true"},
			Tolerations:  []corev1.Toleration{{Key: batchLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		}),
		kube.WithBatchScheduling(schemas.PoolPublic, kube.BatchScheduling{Scheduler: kube.GangSchedulerCoscheduling, SchedulerName: kubestack.CoschedulerName}))

	// Two replicas of a whole node's 8 GPUs each; one node so far.
	const ns = "kube-cosched"
	g := gangFor(t, schemastest.Job("gang").Workspace(ns).Pool(schemas.PoolPublic).Replicas(2).GPUs(8))
	if err := b.Launch(ctx, g); err != nil {
		t.Fatal(err)
	}
	pg, err := adminDynamic(t).Resource(kube.CoschedulingPodGroups).Namespace(ns).Get(ctx, "gang-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); n != 2 {
		t.Errorf("PodGroup minMember %d, want 2", n)
	}
	podsOf := func() []corev1.Pod {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelCoschedulingPodGroup + "=gang-a1"})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	// The coscheduler has tried every pod of the gang (each carries its verdict)...
	start := time.Now()
	testutil.Eventually(t, itest.Left(ctx), "the coscheduler to find no place for the gang", func() bool {
		ps := podsOf()
		for i := range ps {
			if ps[i].Spec.SchedulerName != kubestack.CoschedulerName {
				t.Fatalf("pod %s: schedulerName %q", ps[i].Name, ps[i].Spec.SchedulerName)
			}
			if ps[i].Spec.NodeName != "" {
				t.Fatalf("pod %s was bound to %s while its gang does not fit", ps[i].Name, ps[i].Spec.NodeName)
			}
		}
		return len(ps) == 2 && unschedulable(&ps[0]) && unschedulable(&ps[1])
	}, itest.PollInterval)
	// ... and, through at least one more Permit timeout, bound none, although one of
	// them fits on the node alone.
	tried := map[string]string{}
	for _, p := range podsOf() {
		tried[p.Name] = p.ResourceVersion
	}
	testutil.Eventually(t, itest.Left(ctx), "the coscheduler to retry the gang", func() bool {
		ps := podsOf()
		retried := 0
		for _, p := range ps {
			if p.Spec.NodeName != "" {
				t.Fatalf("pod %s was bound to %s while its gang does not fit", p.Name, p.Spec.NodeName)
			}
			if p.ResourceVersion != tried[p.Name] {
				retried++
			}
		}
		return retried > 0 && time.Since(start) > 6*time.Second // past one Permit wait (5s)
	}, itest.PollInterval)
	t.Logf("no pod of the gang bound in %s", time.Since(start).Round(time.Millisecond))

	// Room appears: the gang binds whole, one pod per node.
	if err := c.AddNode(ctx, nodes[1], map[string]string{batchLabel: "true"}, taint); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	testutil.Eventually(t, itest.Left(ctx), "the whole gang to bind", func() bool {
		ps := podsOf()
		return len(ps) == 2 && ps[0].Spec.NodeName != "" && ps[1].Spec.NodeName != ""
	}, itest.PollInterval)
	ps := podsOf()
	if ps[0].Spec.NodeName == ps[1].Spec.NodeName {
		t.Errorf("both pods on %s", ps[0].Spec.NodeName)
	}
	for _, p := range ps {
		if p.Spec.NodeName != nodes[0] && p.Spec.NodeName != nodes[1] {
			t.Errorf("pod %s on %s, not a node of its pool", p.Name, p.Spec.NodeName)
		}
	}
	t.Logf("node added -> gang bound whole in %s", time.Since(added).Round(time.Millisecond))

	// Stop deletes the PodGroup with the pods.
	if err := b.Stop(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	if _, err := adminDynamic(t).Resource(kube.CoschedulingPodGroups).Namespace(ns).Get(ctx, "gang-a1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodGroup after Stop: %v, want not found", err)
	}
	if err := b.Cleanup(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
}

// Volcano's PodGroup and Kueue's pod-group labels, as the backend writes them, are
// accepted by the API server with the CRDs installed, and carry the gang's size and
// queue.
func TestVolcanoAndKueueObjectsAccepted(t *testing.T) {
	ctx := itest.Context(t, 20*time.Minute)
	setupBatchSchedulers(t, ctx)
	const ns = "kube-batch"
	admin := adminDynamic(t)
	b := batchBackend(t,
		kube.WithBatchScheduling(schemas.PoolSpot, kube.BatchScheduling{Scheduler: kube.GangSchedulerVolcano, Queue: "research"}),
		kube.WithBatchScheduling(schemas.PoolPublic, kube.BatchScheduling{Scheduler: kube.GangSchedulerKueue, Queue: "team-a"}))

	// Volcano: a gang of 3 (no Volcano scheduler runs here: its pods stay Pending).
	vg := gangFor(t, schemastest.Job("vol").Workspace(ns).Pool(schemas.PoolSpot).Replicas(3).CPU("1").GPUs(2))
	if err := b.Launch(ctx, vg); err != nil {
		t.Fatal(err)
	}
	pg, err := admin.Resource(kube.VolcanoPodGroups).Namespace(ns).Get(ctx, "vol-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); n != 3 {
		t.Errorf("Volcano PodGroup minMember %d, want 3", n)
	}
	if q, _, _ := unstructured.NestedString(pg.Object, "spec", "queue"); q != "research" {
		t.Errorf("Volcano PodGroup queue %q, want research", q)
	}
	if least, _, _ := unstructured.NestedStringMap(pg.Object, "spec", "minResources"); least["nvidia.com/gpu"] != "6" || least["cpu"] != "3" {
		t.Errorf("Volcano PodGroup minResources %v, want the gang's 3 CPUs and 6 GPUs", least)
	}
	if o := pg.GetOwnerReferences(); len(o) != 1 || o[0].Kind != "Service" || o[0].Name != "vol-a1" {
		t.Errorf("Volcano PodGroup owners %+v, want the gang's Service", o)
	}
	vpods := jobPods(t, ctx, ns, "vol")
	if len(vpods) != 3 {
		t.Fatalf("%d Volcano pods, want 3", len(vpods))
	}
	for _, p := range vpods {
		if p.Spec.SchedulerName != kube.VolcanoSchedulerName || p.Annotations[kube.AnnotationVolcanoGroupName] != "vol-a1" {
			t.Errorf("pod %s: schedulerName %q, annotations %v", p.Name, p.Spec.SchedulerName, p.Annotations)
		}
	}

	// Kueue: its queue objects from its own CRDs, then a gang of 2 in that queue.
	kueue := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
	}
	objs := []struct {
		gvr schema.GroupVersionResource
		ns  string
		obj map[string]any
	}{
		{kueue("resourceflavors"), "", map[string]any{"metadata": map[string]any{"name": "default-flavor"}}},
		{kueue("clusterqueues"), "", map[string]any{"metadata": map[string]any{"name": "cluster-a"}, "spec": map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{"coveredResources": []any{"cpu"}, "flavors": []any{map[string]any{
				"name": "default-flavor", "resources": []any{map[string]any{"name": "cpu", "nominalQuota": "8"}},
			}}}},
		}}},
		{kueue("localqueues"), ns, map[string]any{"metadata": map[string]any{"name": "team-a", "namespace": ns}, "spec": map[string]any{"clusterQueue": "cluster-a"}}},
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetAPIVersion(o.gvr.GroupVersion().String())
		u.SetKind(map[string]string{"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}[o.gvr.Resource])
		if _, err := admin.Resource(o.gvr).Namespace(o.ns).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s: %v", o.gvr.Resource, err)
		}
	}
	kg := gangFor(t, schemastest.Job("kq").Workspace(ns).Pool(schemas.PoolPublic).Replicas(2).CPU("1"))
	if err := b.Launch(ctx, kg); err != nil {
		t.Fatal(err)
	}
	kpods := jobPods(t, ctx, ns, "kq")
	if len(kpods) != 2 {
		t.Fatalf("%d Kueue pods, want 2", len(kpods))
	}
	for _, p := range kpods {
		if p.Labels[kube.LabelKueueQueueName] != "team-a" || p.Labels[kube.LabelKueuePodGroupName] != "kq-a1" ||
			p.Annotations[kube.AnnotationKueuePodGroupTotalCount] != "2" {
			t.Errorf("pod %s: labels %v, annotations %v", p.Name, p.Labels, p.Annotations)
		}
	}
	lq, err := admin.Resource(kueue("localqueues")).Namespace(ns).Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pods' LocalQueue: %v", err)
	}
	if cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue"); cq != "cluster-a" {
		t.Errorf("LocalQueue clusterQueue %q", cq)
	}

	for _, g := range []backend.GangSpec{vg, kg} {
		if err := b.Stop(ctx, g.GangRef); err != nil {
			t.Fatal(err)
		}
		if err := b.Cleanup(ctx, g.GangRef); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Resource(kube.VolcanoPodGroups).Namespace(ns).Get(ctx, "vol-a1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Volcano PodGroup after Stop and Cleanup: %v, want not found", err)
	}
}
