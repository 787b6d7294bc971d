package kube

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// newDynamic is a fake dynamic client that serves both PodGroup resources.
func newDynamic() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		CoschedulingPodGroups: "PodGroupList",
		VolcanoPodGroups:      "PodGroupList",
	})
}

func getGroup(t *testing.T, dc *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	pg, err := dc.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return pg
}

func TestCoschedulingPodGroupAndPods(t *testing.T) {
	cs, dc := newClient(), newDynamic()
	b := newBackend(t, cs, WithDynamicClient(dc), WithBatchScheduling(schemas.PoolPublic, BatchScheduling{Scheduler: GangSchedulerCoscheduling}))
	job := ddp("bert").Pool(schemas.PoolPublic).Mutate(func(j *schemas.TrainingJob) {
		j.Spec.Resources.PlacementTimeout = schemas.Duration(90 * time.Second)
	})
	g := gangOf(t, job)
	launch(t, b, g)

	pg := getGroup(t, dc, CoschedulingPodGroups, "vision", "bert-a1")
	if got, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); got != 3 {
		t.Errorf("minMember = %d, want 3 (every replica)", got)
	}
	if got, _, _ := unstructured.NestedInt64(pg.Object, "spec", "scheduleTimeoutSeconds"); got != 90 {
		t.Errorf("scheduleTimeoutSeconds = %d, want 90 (the placement timeout)", got)
	}
	least, _, _ := unstructured.NestedStringMap(pg.Object, "spec", "minResources")
	// master 4 CPU 16Gi, 2 workers 8 CPU 64Gi 8 GPUs each.
	if least["cpu"] != "20" || least["memory"] != "144Gi" || least["nvidia.com/gpu"] != "16" {
		t.Errorf("minResources = %v, want the whole gang's requests", least)
	}
	owners := pg.GetOwnerReferences()
	if len(owners) != 1 || owners[0].Kind != "Service" || owners[0].Name != "bert-a1" || owners[0].UID == "" {
		t.Errorf("owners = %+v, want the gang's Service", owners)
	}
	if pg.GetLabels()[LabelGang] == "" {
		t.Errorf("labels = %v, want the gang's", pg.GetLabels())
	}
	for name, p := range pods(t, cs, "vision") {
		if p.Labels[LabelCoschedulingPodGroup] != "bert-a1" {
			t.Errorf("%s: pod-group label %q, want bert-a1", name, p.Labels[LabelCoschedulingPodGroup])
		}
		if p.Spec.SchedulerName != DefaultCoschedulingSchedulerName {
			t.Errorf("%s: schedulerName %q", name, p.Spec.SchedulerName)
		}
	}

	// Stop deletes the group with the pods; a second Stop finds nothing to delete.
	ref := g.GangRef
	if err := b.Stop(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(CoschedulingPodGroups).Namespace("vision").Get(context.Background(), "bert-a1", metav1.GetOptions{}); err == nil {
		t.Error("the PodGroup outlived Stop")
	}
	if err := b.Stop(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if err := b.Cleanup(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
}

func TestVolcanoPodGroupAndPods(t *testing.T) {
	cs, dc := newClient(), newDynamic()
	b := newBackend(t, cs, WithDynamicClient(dc),
		WithBatchScheduling(schemas.PoolSpot, BatchScheduling{Scheduler: GangSchedulerVolcano, Queue: "research"}))
	g := gangOf(t, ddp("bert").Pool(schemas.PoolSpot))
	launch(t, b, g)

	pg := getGroup(t, dc, VolcanoPodGroups, "vision", "bert-a1")
	if got, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); got != 3 {
		t.Errorf("minMember = %d, want 3", got)
	}
	if q, _, _ := unstructured.NestedString(pg.Object, "spec", "queue"); q != "research" {
		t.Errorf("queue = %q, want research", q)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(pg.Object, "spec", "scheduleTimeoutSeconds"); found {
		t.Error("a Volcano PodGroup has no scheduleTimeoutSeconds")
	}
	for name, p := range pods(t, cs, "vision") {
		if p.Annotations[AnnotationVolcanoGroupName] != "bert-a1" || p.Annotations[AnnotationVolcanoQueueName] != "research" {
			t.Errorf("%s: annotations %v", name, p.Annotations)
		}
		if p.Spec.SchedulerName != VolcanoSchedulerName {
			t.Errorf("%s: schedulerName %q, want volcano", name, p.Spec.SchedulerName)
		}
	}
	// Cleanup deletes the group even where no garbage collector runs.
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(VolcanoPodGroups).Namespace("vision").Get(context.Background(), "bert-a1", metav1.GetOptions{}); err == nil {
		t.Error("the PodGroup outlived Cleanup")
	}
}

func TestKueuePodGroupLabels(t *testing.T) {
	cs := newClient()
	// Kueue needs no dynamic client: its pod groups are labels on the pods.
	b := newBackend(t, cs, WithBatchScheduling(schemas.PoolQuota, BatchScheduling{Scheduler: GangSchedulerKueue, Queue: "team-a"}))
	launch(t, b, gangOf(t, ddp("bert")))
	ps := pods(t, cs, "vision")
	if len(ps) != 3 {
		t.Fatalf("%d pods, want 3", len(ps))
	}
	for name, p := range ps {
		if p.Labels[LabelKueueQueueName] != "team-a" || p.Labels[LabelKueuePodGroupName] != "bert-a1" {
			t.Errorf("%s: labels %v", name, p.Labels)
		}
		if p.Annotations[AnnotationKueuePodGroupTotalCount] != "3" || p.Annotations[AnnotationKueueRetriableInGroup] != "false" {
			t.Errorf("%s: annotations %v", name, p.Annotations)
		}
		if p.Spec.SchedulerName != "" {
			t.Errorf("%s: schedulerName %q, want the default scheduler", name, p.Spec.SchedulerName)
		}
	}
}

func TestOtherPoolsKeepOpenDLCPlacement(t *testing.T) {
	cs, dc := newClient(), newDynamic()
	b := newBackend(t, cs, WithDynamicClient(dc), WithBatchScheduling(schemas.PoolSpot, BatchScheduling{Scheduler: GangSchedulerCoscheduling}))
	launch(t, b, gangOf(t, ddp("bert")))
	for name, p := range pods(t, cs, "vision") {
		if p.Spec.SchedulerName != "" || p.Labels[LabelCoschedulingPodGroup] != "" {
			t.Errorf("%s: a quota pod got the spot pool's batch scheduling: %q %v", name, p.Spec.SchedulerName, p.Labels)
		}
	}
	list, err := dc.Resource(CoschedulingPodGroups).Namespace("vision").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("PodGroups %v (%v), want none", list, err)
	}
}

func TestBatchSchedulingSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    BatchScheduling
		dyn  bool
		want string
	}{
		{"kueue without queue", BatchScheduling{Scheduler: GangSchedulerKueue}, false, "kueue needs a queue"},
		{"queue without scheduler", BatchScheduling{Queue: "q"}, false, "needs a gang scheduler"},
		{"coscheduling queue", BatchScheduling{Scheduler: GangSchedulerCoscheduling, Queue: "q"}, true, "no queues"},
		{"bad scheduler name", BatchScheduling{Scheduler: GangSchedulerVolcano, SchedulerName: "Not_A_Name"}, true, "scheduler name"},
		{"unknown", BatchScheduling{Scheduler: "yunikorn"}, true, "unknown gang scheduler"},
		{"no dynamic client", BatchScheduling{Scheduler: GangSchedulerVolcano}, false, "dynamic client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{WithBatchScheduling(schemas.PoolSpot, tc.s)}
			if tc.dyn {
				opts = append(opts, WithDynamicClient(newDynamic()))
			}
			_, err := New(newClient(), opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseGangScheduler(t *testing.T) {
	for in, want := range map[string]GangScheduler{"": GangSchedulerOpenDLC, "opendlc": GangSchedulerOpenDLC,
		"coscheduling": GangSchedulerCoscheduling, "volcano": GangSchedulerVolcano, "kueue": GangSchedulerKueue} {
		if got, err := ParseGangScheduler(in); err != nil || got != want {
			t.Errorf("ParseGangScheduler(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseGangScheduler("slurm"); err == nil {
		t.Error("ParseGangScheduler(slurm): want an error")
	}
}

// A cluster without the scheduler's CRD refuses the gang as a configuration error
// naming the missing resource, before any pod exists.
func TestMissingPodGroupCRDIsInvalidSpec(t *testing.T) {
	cs := newClient()
	// A dynamic client that serves no PodGroups.
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{})
	dc.PrependReactor("create", "podgroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "bert-a1")
	})
	b := newBackend(t, cs, WithDynamicClient(dc), WithBatchScheduling(schemas.PoolQuota, BatchScheduling{Scheduler: GangSchedulerCoscheduling}))
	err := b.Launch(context.Background(), gangOf(t, ddp("bert")))
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "podgroups.scheduling.x-k8s.io") {
		t.Fatalf("Launch: %v, want an InvalidSpec naming the resource", err)
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods created, want none", n)
	}
}

// deploy/rbac-batchsched.yaml grants exactly BatchSchedulerPolicyRules to the worker's
// service account, and they cover every PodGroup request of a gang's life cycle.
func TestBatchSchedulerRBAC(t *testing.T) {
	data, err := os.ReadFile("../../deploy/rbac-batchsched.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("%d documents, want a ClusterRole and its binding", len(docs))
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.UnmarshalStrict(docs[0], &role); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(BatchSchedulerPolicyRules(), role.Rules); diff != "" {
		t.Errorf("rules differ from BatchSchedulerPolicyRules (-want +got):\n%s", diff)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: WorkerServiceAccount, Namespace: WorkerNamespace}}
	if role.Name != WorkerBatchClusterRole || binding.RoleRef.Name != WorkerBatchClusterRole || !cmp.Equal(want, binding.Subjects) {
		t.Errorf("role %q bound as %+v to %+v", role.Name, binding.RoleRef, binding.Subjects)
	}

	cs, dc := newClient(), newDynamic()
	b := newBackend(t, cs, WithDynamicClient(dc),
		WithBatchScheduling(schemas.PoolSpot, BatchScheduling{Scheduler: GangSchedulerVolcano}),
		WithBatchScheduling(schemas.PoolPublic, BatchScheduling{Scheduler: GangSchedulerCoscheduling}))
	for _, pool := range []schemas.Pool{schemas.PoolSpot, schemas.PoolPublic} {
		g := gangOf(t, ddp("bert-"+string(pool)).Pool(pool))
		launch(t, b, g)
		launch(t, b, g) // AlreadyExists
		if err := b.Stop(context.Background(), g.GangRef); err != nil {
			t.Fatal(err)
		}
		if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
			t.Fatal(err)
		}
	}
	used := map[string]bool{}
	for _, a := range dc.Actions() {
		res := a.GetResource()
		if !allowed(BatchSchedulerPolicyRules(), res.Group, res.Resource, a.GetVerb()) {
			t.Errorf("%s %s (group %q) is not allowed", a.GetVerb(), res.Resource, res.Group)
		}
		used[a.GetVerb()+" "+res.Group] = true
	}
	for _, v := range []string{"create", "delete"} {
		for _, g := range []string{CoschedulingPodGroups.Group, VolcanoPodGroups.Group} {
			if !used[v+" "+g] {
				t.Errorf("%s on %s podgroups is granted but never used", v, g)
			}
		}
	}
}
