package kube

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/opendlc/opendlc/schemas"
)

// nodeCache watches the cluster's nodes so that a replica on a node that stopped
// reporting is seen as lost at once: Kubernetes itself only evicts such pods after the
// node monitor grace period plus the pods' not-ready toleration (five minutes by
// default), and kwok or a partitioned kubelet may never update the pod at all.
//
// It needs list and watch on nodes; without them it never syncs and reports nothing,
// and jobs fall back to Kubernetes' own eviction path.
type nodeCache struct {
	client kubernetes.Interface
	resync time.Duration
	notify func()

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
			AddFunc:    func(any) { c.notify() },
			UpdateFunc: func(_, _ any) { c.notify() },
			DeleteFunc: func(any) { c.notify() },
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

// lost reports whether node is not Ready, with a message; false when the cache has not
// synced (it cannot tell). A node that is gone is not reported: the pod garbage
// collector deletes its pods, which Observe reports itself.
func (c *nodeCache) lost(node string) (bool, string) {
	c.start()
	if node == "" || c.nodes == nil || !c.nodes.HasSynced() {
		return false, ""
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(node)
	if err != nil {
		return false, ""
	}
	if !ok {
		return false, ""
	}
	n := obj.(*corev1.Node)
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return false, ""
			}
			return true, fmt.Sprintf("node %s is not ready since %s: %s", node,
				cond.LastTransitionTime.UTC().Format(time.RFC3339), joinReason(cond.Reason, cond.Message))
		}
	}
	return false, ""
}

// markLost fails the replicas whose node is lost: they will not finish.
func (b *Backend) markLost(reps []schemas.ReplicaStatus, stopped bool) {
	if stopped {
		return
	}
	for i := range reps {
		r := &reps[i]
		if r.Node == "" || r.Phase.Terminal() {
			continue
		}
		if lost, msg := b.nodes.lost(r.Node); lost {
			r.Phase, r.Reason, r.Message = schemas.ReplicaFailed, schemas.FailureNodeLost, msg
		}
	}
}
