package kube

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/opendlc/opendlc/schemas"
)

// nodeCache watches the cluster's nodes so that a replica on a node that stopped
// reporting is seen as lost after the node-lost grace (WithNodeLostGrace), rather than
// when Kubernetes itself evicts such pods, after the node monitor grace period plus the
// pods' not-ready toleration (five minutes by default); kwok or a partitioned kubelet
// may never update the pod at all.
//
// It needs list and watch on nodes; without them it never syncs and reports nothing,
// and jobs fall back to Kubernetes' own eviction path.
type nodeCache struct {
	client kubernetes.Interface
	resync time.Duration
	notify func()
	clock  clock.PassiveClock // set by New; nil means the real clock

	notReady notReady // when each node was first seen not Ready (transient.go)

	startOnce sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	factory   informers.SharedInformerFactory
	nodes     cache.SharedIndexInformer
}

func newNodeCache(client kubernetes.Interface, resync time.Duration, notify func()) *nodeCache {
	return &nodeCache{client: client, resync: resync, notify: notify, stop: make(chan struct{})}
}

func (c *nodeCache) start() {
	c.startOnce.Do(func() {
		select {
		case <-c.stop:
			return
		default:
		}
		c.factory = informers.NewSharedInformerFactoryWithOptions(c.client, c.resync,
			informers.WithTransform(stripManagedFields))
		c.nodes = c.factory.Core().V1().Nodes().Informer()
		_, _ = c.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.nodeEvent(o, false); c.notify() },
			UpdateFunc: func(_, o any) { c.nodeEvent(o, false); c.notify() },
			DeleteFunc: func(o any) { c.nodeEvent(o, true); c.notify() },
		})
		c.factory.Start(c.stop)
	})
}

func (c *nodeCache) close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.startOnce.Do(func() {})
		if c.factory != nil {
			c.factory.Shutdown()
		}
	})
}

// lost reports whether node is not Ready, for how long, with a message; false when the
// cache has not synced (it cannot tell). A node that is gone is not reported: the pod
// garbage collector deletes its pods, which Observe reports itself.
func (c *nodeCache) lost(node string) (bool, time.Duration, string) {
	c.start()
	if node == "" || c.nodes == nil || !c.nodes.HasSynced() {
		return false, 0, ""
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(node)
	if err != nil || !ok {
		return false, 0, ""
	}
	cond := nodeReadyCondition(obj.(*corev1.Node))
	if cond == nil || cond.Status == corev1.ConditionTrue {
		return false, 0, ""
	}
	return true, c.notReadyFor(node, cond), fmt.Sprintf("node %s is not ready since %s: %s", node,
		cond.LastTransitionTime.UTC().Format(time.RFC3339), joinReason(cond.Reason, cond.Message))
}

// markLost fails the replicas whose node has not been Ready for the node-lost grace:
// they will not finish. Within the grace they keep their phase, with a message saying
// how long their node has been not Ready.
func (b *Backend) markLost(reps []schemas.ReplicaStatus, stopped bool) {
	if stopped {
		return
	}
	grace := b.transient.nodeLostGrace
	for i := range reps {
		r := &reps[i]
		if r.Node == "" || r.Phase.Terminal() {
			continue
		}
		lost, since, msg := b.nodes.lost(r.Node)
		switch {
		case !lost:
		case since >= grace:
			r.Phase, r.Reason = schemas.ReplicaFailed, schemas.FailureNodeLost
			r.Message = fmt.Sprintf("%s (not ready for %s, node-lost grace %s)", msg, since.Round(time.Second), grace)
		default:
			r.Message = joinReason(r.Message, fmt.Sprintf("%s (not ready for %s; replicas fail as NodeLost after %s)",
				msg, since.Round(time.Second), grace))
		}
	}
}
