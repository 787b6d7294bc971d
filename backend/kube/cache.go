package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opendlc/opendlc/backend"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// gangIndex indexes pods by namespace and gang label.
const gangIndex = "gang"

// podCache is a cluster-wide view of OpenDLC's pods and services, filled by informers
// that start on first use. Cluster-wide rather than per namespace: one watch per
// resource whatever the number of workspaces, and no bookkeeping of which namespaces to
// watch. Every read falls back to the API server when the informers have not synced, and
// callers fall back on a miss, so the cache only ever saves requests.
type podCache struct {
	client kubernetes.Interface
	resync time.Duration

	startOnce sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	factory   informers.SharedInformerFactory
	pods      cache.SharedIndexInformer
	services  cache.SharedIndexInformer

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every informer event
	// gone holds the last state of recently deleted pods: a pod evicted or preempted
	// is gone from the API before anyone looks, but its last state says why.
	gone map[string]tombstone
}

// tombstone is a deleted pod's last state.
type tombstone struct {
	pod *corev1.Pod
	at  time.Time
}

// tombstoneTTL bounds how long a deleted pod's last state is kept.
const tombstoneTTL = 10 * time.Minute

func newPodCache(client kubernetes.Interface, resync time.Duration) *podCache {
	return &podCache{client: client, resync: resync, stop: make(chan struct{}), changed: make(chan struct{})}
}

// start starts the informers once; it does not wait for them to sync.
func (c *podCache) start() {
	c.startOnce.Do(func() {
		select {
		case <-c.stop:
			return // closed before first use
		default:
		}
		c.factory = informers.NewSharedInformerFactoryWithOptions(c.client, c.resync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}).String()
			}),
			informers.WithTransform(stripManagedFields),
		)
		c.pods = c.factory.Core().V1().Pods().Informer()
		_ = c.pods.AddIndexers(cache.Indexers{gangIndex: func(obj any) ([]string, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, nil //nolint:nilerr // an object without metadata is in no gang
			}
			return []string{m.GetNamespace() + "/" + m.GetLabels()[LabelGang]}, nil
		}})
		c.services = c.factory.Core().V1().Services().Informer()
		h := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.notify() },
			UpdateFunc: func(any, any) { c.notify() },
			DeleteFunc: func(any) { c.notify() },
		}
		_, _ = c.pods.AddEventHandler(h)
		_, _ = c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.remember})
		_, _ = c.services.AddEventHandler(h)
		c.factory.Start(c.stop)
	})
}

func (c *podCache) close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.startOnce.Do(func() {}) // a later start does nothing
		if c.factory != nil {
			c.factory.Shutdown()
		}
	})
}

// remember keeps a deleted pod's last state for a while.
func (c *podCache) remember(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone == nil {
		c.gone = map[string]tombstone{}
	}
	for k, t := range c.gone {
		if now.Sub(t.at) > tombstoneTTL {
			delete(c.gone, k)
		}
	}
	c.gone[pod.Namespace+"/"+pod.Name] = tombstone{pod: pod, at: now}
}

// deleted returns the last state of a pod deleted recently, or nil.
func (c *podCache) deleted(ns, name string) *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone[ns+"/"+name].pod
}

// notify wakes everyone waiting on changed.
func (c *podCache) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
}

// changes returns a channel that is closed at the next informer event.
func (c *podCache) changes() <-chan struct{} {
	c.start()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *podCache) synced() bool {
	c.start()
	return c.pods != nil && c.pods.HasSynced() && c.services.HasSynced()
}

// service returns the named Service, nil if it does not exist.
func (c *podCache) service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return cachedGet(ctx, c, func() cache.Store { return c.services.GetStore() },
		c.client.CoreV1().Services(ns).Get, "service", ns, name)
}

// pod returns the named pod, nil if it does not exist.
func (c *podCache) pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return cachedGet(ctx, c, func() cache.Store { return c.pods.GetStore() },
		c.client.CoreV1().Pods(ns).Get, "pod", ns, name)
}

// cachedGet returns the object ns/name from the store once the cache has synced, else
// (or on a miss) from the API server with get; nil if it does not exist. kind names the
// object in errors.
func cachedGet[T any](ctx context.Context, c *podCache, store func() cache.Store,
	get func(context.Context, string, metav1.GetOptions) (*T, error), kind, ns, name string,
) (*T, error) {
	if c.synced() {
		if obj, ok, err := store().GetByKey(ns + "/" + name); err == nil && ok {
			return obj.(*T), nil
		}
	}
	obj, err := get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kube: get %s %s/%s: %w", kind, ns, name, err)
	}
	return obj, nil
}

// gangPods returns the gang's pods. It reads the cache when that holds at least want
// pods, and the API server otherwise: right after Launch the cache may not have seen
// every pod yet, and a pod that really is missing must be confirmed missing.
func (c *podCache) gangPods(ctx context.Context, ns string, ref backend.GangRef, want int) ([]*corev1.Pod, error) {
	if want > 0 {
		if pods, ok := c.cachedGangPods(ns, ref); ok && len(pods) >= want {
			return pods, nil
		}
	}
	return listGangPods(ctx, c.client, ns, ref)
}

// cachedGangPods returns the gang's pods in the cache; false when it has not synced.
func (c *podCache) cachedGangPods(ns string, ref backend.GangRef) ([]*corev1.Pod, bool) {
	if !c.synced() {
		return nil, false
	}
	objs, err := c.pods.GetIndexer().ByIndex(gangIndex, ns+"/"+gangValue(ref))
	if err != nil {
		return nil, false
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out, true
}

// listGangPods lists the gang's pods from the API server.
func listGangPods(ctx context.Context, client kubernetes.Interface, ns string, ref backend.GangRef) ([]*corev1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: gangSelector(ref).String()})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods of %s: %w", ref.ID(), err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// stripManagedFields drops managedFields from cached objects: the worker never reads
// them and they are a good part of a pod's size. It returns a shallow copy rather than
// editing the object in place, which may be shared (fake clientsets hand the same object
// to every watcher).
func stripManagedFields(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		if len(o.ManagedFields) > 0 {
			c := *o
			c.ManagedFields = nil
			return &c, nil
		}
	case *corev1.Service:
		if len(o.ManagedFields) > 0 {
			c := *o
			c.ManagedFields = nil
			return &c, nil
		}
	}
	return obj, nil
}
