package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/opendlc/opendlc/schemas/schemastest"
)

// slowDeletes is a clientset whose pod deletions each take a round trip's time, and
// which records how many were in flight at once. (The fake clientset runs its
// reactors under one lock, so its own deletions are never concurrent.)
type slowDeletes struct {
	kubernetes.Interface
	mu            sync.Mutex
	inFlight, max int
	deleted       int
}

// IsWatchListSemanticsUnSupported says, as the fake clientset it wraps does, that the
// informers must list and then watch.
func (s *slowDeletes) IsWatchListSemanticsUnSupported() bool { return true }

func (s *slowDeletes) CoreV1() typedcorev1.CoreV1Interface {
	return slowCore{s.Interface.CoreV1(), s}
}

type slowCore struct {
	typedcorev1.CoreV1Interface
	s *slowDeletes
}

func (c slowCore) Pods(ns string) typedcorev1.PodInterface {
	return slowPods{c.CoreV1Interface.Pods(ns), c.s}
}

type slowPods struct {
	typedcorev1.PodInterface
	s *slowDeletes
}

func (p slowPods) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	p.s.mu.Lock()
	p.s.inFlight++
	p.s.max = max(p.s.max, p.s.inFlight)
	p.s.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	p.s.mu.Lock()
	p.s.inFlight--
	p.s.deleted++
	p.s.mu.Unlock()
	return p.PodInterface.Delete(ctx, name, o)
}

// Stop and Cleanup delete a large gang's pods with CreateParallelism deletions in
// flight, as Launch creates them, not one round trip after another: a 256-pod gang's
// stop took over 2 minutes on a loaded machine when each deletion waited for the one
// before (issue 19). 32 pods are enough to see the bound reached.
func TestStopDeletesInParallel(t *testing.T) {
	const n = 32
	for _, op := range []string{"Stop", "Cleanup"} {
		t.Run(op, func(t *testing.T) {
			cs := newClient()
			slow := &slowDeletes{Interface: cs}
			b, err := New(slow, WithPollInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			b.cache.start()
			waitSynced(t, b)
			g := gangOf(t, schemastest.Job("big").Workspace("vision").Role("worker", n))
			launch(t, b, g)
			for i := range g.Replicas {
				setPodStatus(t, cs, "vision", g.Replicas[i].Name, runningStatus(), "node-a")
			}
			do := b.Stop
			if op == "Cleanup" {
				do = b.Cleanup
			}
			if err := do(context.Background(), g.GangRef); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			slow.mu.Lock()
			defer slow.mu.Unlock()
			if slow.deleted < n || slow.max < 2 || slow.max > CreateParallelism {
				t.Errorf("%s: %d deletions, at most %d in flight; want %d, 2..%d in flight", op, slow.deleted, slow.max, n, CreateParallelism)
			}
			t.Logf("%s: %d deletions, at most %d in flight", op, slow.deleted, slow.max)
		})
	}
}
