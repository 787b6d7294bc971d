package realnode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/kubestack"
)

// capacity admits the parallel tests' pods to the real nodes as a gang scheduler would:
// a test runs once all the pods it will ask for fit beside those of the tests already
// running, and waits otherwise. The cluster has no gang scheduler, so without this,
// tests in parallel whose pods together ask for more than the nodes hold can each get
// part of their pods placed and wait on each other until their placement timeouts.
//
// "Fit" is bounded so that every pod is placed at once, however the scheduler spreads
// them: a test is admitted only while the CPU requested by every admitted test, its
// own included, is at most the nodes' allocatable CPU less, per node, the largest pod
// any of them asks for. Then some node always has room for any of their pods (if every
// node had less free than the largest pod, the free CPU would be below that bound).
// Pods that are not admitted are those of the serial tests, which run before the
// parallel ones start. A pod that ended (Succeeded or Failed) holds nothing in the
// scheduler, so a test gives its share back when it ends.
type capacity struct {
	allocatable int64 // millicores, summed over the real nodes
	nodes       int64

	mu      sync.Mutex
	held    map[*testing.T]reservation
	changed chan struct{} // closed and replaced when a test gives its share back
}

type reservation struct{ sum, largest int64 }

// newCapacity reads the real nodes' allocatable CPU.
func newCapacity(ctx context.Context) (*capacity, error) {
	nodes, err := env.cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	c := &capacity{held: map[*testing.T]reservation{}, changed: make(chan struct{})}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, kubestack.RealNodePrefix) {
			c.allocatable += n.Status.Allocatable.Cpu().MilliValue()
			c.nodes++
		}
	}
	if c.nodes == 0 {
		return nil, fmt.Errorf("no real node among %d nodes", len(nodes.Items))
	}
	return c, nil
}

// bound is the CPU the admitted tests may request in all when the largest pod among
// them asks for largest.
func (c *capacity) bound(largest int64) int64 { return c.allocatable - c.nodes*largest }

// reserve waits until the pods a parallel test will run at once (their CPU requests,
// such as "500m") fit on the real nodes, and holds them until the test ends. It fails
// the test if they could never fit, or if the test's context ends first.
func reserve(t *testing.T, pods ...string) {
	t.Helper()
	c := env.capacity
	var r reservation
	for _, p := range pods {
		quantity := resource.MustParse(p)
		q := quantity.MilliValue()
		r.sum += q
		r.largest = max(r.largest, q)
	}
	if r.sum > c.bound(r.largest) {
		t.Fatalf("pods %v ask for %dm of CPU: more than the %dm that real nodes of %dm in all admit with pods of %dm",
			pods, r.sum, c.bound(r.largest), c.allocatable, r.largest)
	}
	for {
		c.mu.Lock()
		sum, largest := r.sum, r.largest
		for _, h := range c.held {
			sum += h.sum
			largest = max(largest, h.largest)
		}
		if sum <= c.bound(largest) {
			c.held[t] = r
			c.mu.Unlock()
			t.Cleanup(func() {
				c.mu.Lock()
				delete(c.held, t)
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
			})
			return
		}
		wait := c.changed
		c.mu.Unlock()
		select {
		case <-wait:
		case <-t.Context().Done():
			t.Fatal("the test ended while waiting for room on the real nodes")
		}
	}
}
