package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// watches counts, per fake clientset, the watches established on it.
var watches sync.Map // *fake.Clientset → *atomic.Int32

// newClient returns a fake clientset that, like an API server, gives every created
// object a UID (the fake leaves it empty, and owner references need it), and counts the
// watches established on it.
func newClient(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objs...)
	var n atomic.Int64
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ca, ok := a.(k8stesting.CreateAction); ok {
			if m, ok := ca.GetObject().(metav1.Object); ok && m.GetUID() == "" {
				m.SetUID(types.UID(fmt.Sprintf("uid-%d", n.Add(1))))
			}
		}
		return false, nil, nil
	})
	count := &atomic.Int32{}
	watches.Store(cs, count)
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			count.Add(1)
		}
		return true, w, err
	})
	return cs
}

// newBackend returns a Backend on cs with fast waits, closed when the test ends. Its
// informers are started and watching before it is returned: the fake clientset, unlike
// an API server, loses the events between an informer's list and its watch.
func newBackend(t *testing.T, cs *fake.Clientset, opts ...Option) *Backend {
	t.Helper()
	b := newUncachedBackend(t, cs, opts...)
	count, _ := watches.Load(cs)
	before := count.(*atomic.Int32).Load()
	b.cache.start()
	testutil.Eventually(t, 10*time.Second, "the informers to watch", func() bool {
		return count.(*atomic.Int32).Load() >= before+2 && b.cache.synced()
	})
	return b
}

// newUncachedBackend returns a Backend on cs whose informers have not started, as in a
// worker that has just started: its first reads go to the API server.
func newUncachedBackend(t *testing.T, cs *fake.Clientset, opts ...Option) *Backend {
	t.Helper()
	b, err := New(cs, append([]Option{WithPollInterval(10 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// gangOf expands a job into the gang of its first attempt, as the activity layer does.
func gangOf(t *testing.T, job *schemastest.JobBuilder) backend.GangSpec {
	t.Helper()
	g, err := backend.BuildGang(job.Obj(), backend.GangParams{Ref: backend.GangRef{
		Workspace: job.Obj().Metadata.Workspace, Job: job.Obj().Metadata.Name, Attempt: 1,
	}, UID: "job-uid"})
	if err != nil {
		t.Fatalf("BuildGang: %v", err)
	}
	return g
}

// ddp is a pytorch job with a master and two workers with 8 GPUs each.
func ddp(name string) *schemastest.JobBuilder {
	return schemastest.Job(name).Workspace("vision").Label("team", "cv").
		Role("master", 1).CPU("4").Memory("16Gi").
		Role("worker", 2).CPU("8").Memory("64Gi").GPUs(8).
		NodeSelector("gpu", "h100").
		Toleration(schemas.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"})
}

func launch(t *testing.T, b *Backend, g backend.GangSpec) {
	t.Helper()
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch: %v", err)
	}
}

func observe(t *testing.T, b *Backend, ref backend.GangRef) []schemas.ReplicaStatus {
	t.Helper()
	st, err := b.Observe(context.Background(), ref)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return st.Replicas
}

// pods lists the pods in ns by name.
func pods(t *testing.T, cs *fake.Clientset, ns string) map[string]*corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// setPodStatus replaces a pod's status, as the kubelet would.
func setPodStatus(t *testing.T, cs *fake.Clientset, ns, name string, st corev1.PodStatus, node string) {
	t.Helper()
	ctx := context.Background()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = st
	if node != "" {
		p.Spec.NodeName = node
	}
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitSynced waits until b's informers have synced.
func waitSynced(t *testing.T, b *Backend) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "informers to sync", func() bool { return b.cache.synced() })
}

var (
	t0 = metav1.NewTime(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 5, 1, 10, 5, 0, 0, time.UTC))
)

func timeP(t metav1.Time) *time.Time { u := t.UTC(); return &u }
