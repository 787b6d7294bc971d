package kube

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/internal/testutil"
)

// With one launch slot, a second gang creates nothing while the first is still
// creating its pods, and launches once the first is done; a launch that cannot get a
// slot before its context ends says so and creates nothing.
func TestLaunchesTakeASlot(t *testing.T) {
	cs := newClient()
	hold := make(chan struct{})
	var mu sync.Mutex
	created := map[string]int{} // job label → pods created
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		job := pod.Labels[LabelJob]
		mu.Lock()
		created[job]++
		mu.Unlock()
		if job == "first" {
			<-hold
		}
		return false, nil, nil
	})
	count := func(job string) int {
		mu.Lock()
		defer mu.Unlock()
		return created[job]
	}
	b := newBackend(t, cs, WithLaunchConcurrency(1))
	var release sync.Once
	unhold := func() { release.Do(func() { close(hold) }) }
	t.Cleanup(unhold) // before the backend closes: a failed test leaves no creation hanging
	first, second := gangOf(t, ddp("first")), gangOf(t, ddp("second"))

	firstDone := make(chan error, 1)
	go func() { firstDone <- b.Launch(context.Background(), first) }()
	testutil.Eventually(t, 10*time.Second, "the first gang to start creating its pods", func() bool { return count("first") > 0 })

	// No slot within the context: nothing of the second gang is created. The fake
	// clientset holds its lock while a reactor runs, so a launch that does not wait for
	// a slot blocks on that lock, held by the first gang's creation, and never sees its
	// context end: wait for it a while, not for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	launched := make(chan error, 1)
	go func() { launched <- b.Launch(ctx, second) }()
	var err error
	select {
	case err = <-launched:
	case <-time.After(10 * time.Second):
		t.Fatal("a launch with no slot free did not return within 10s of its context's 50ms deadline: it did not wait for a slot")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "launch slot") {
		t.Fatalf("launch without a slot: %v, want a launch-slot deadline error", err)
	}
	if n := count("second"); n != 0 {
		t.Fatalf("the second gang created %d pods without a slot", n)
	}

	secondDone := make(chan error, 1)
	go func() { secondDone <- b.Launch(context.Background(), second) }()
	if n := count("second"); n != 0 {
		t.Fatalf("the second gang created %d pods while the first held the only slot", n)
	}
	unhold()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	if a, b := count("first"), count("second"); a != len(first.Replicas) || b != len(second.Replicas) {
		t.Fatalf("created %d and %d pods, want %d and %d", a, b, len(first.Replicas), len(second.Replicas))
	}
}

func TestLaunchConcurrencyMustBePositive(t *testing.T) {
	if _, err := New(newClient(), WithLaunchConcurrency(0)); err == nil || !strings.Contains(err.Error(), "launch concurrency") {
		t.Fatalf("New with launch concurrency 0: %v", err)
	}
}
