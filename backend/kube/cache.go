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

// podCache is a view of OpenDLC's pods and services, filled by informers that start on
// first use. Cluster-wide by default: one watch per resource whatever the number of
// workspaces, and no bookkeeping of which namespaces to watch. In namespaced mode
// (WithNamespaces) it holds one informer pair per namespace the worker may use, since
// the worker may not list or watch anything cluster-wide. Every read falls back to the
// API server when the informers have not synced, and callers fall back on a miss, so
// the cache only ever saves requests.
type podCache struct {
	client kubernetes.Interface
	resync time.Duration
	// namespaces are the namespaces watched; nil watches all of them at once.
	namespaces []string

	startOnce sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	// scopes holds the informers by namespace; "" (metav1.NamespaceAll) when
	// cluster-wide. Written once by start.
	scopes map[string]*cacheScope

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every informer event
	// gone holds the last state of recently deleted pods: a pod evicted or preempted
	// is gone from the API before anyone looks, but its last state says why.
	gone map[string]tombstone
	// gangWaiters holds the channels of gangChanges by gangKey (informer.go).
	gangWaiters map[string]chan struct{}
}

// cacheScope is the informer pair of one namespace, or of all of them.
type cacheScope struct {
	factory  informers.SharedInformerFactory
	pods     cache.SharedIndexInformer
	services cache.SharedIndexInformer
}

// tombstone is a deleted pod's last state.
type tombstone struct {
	pod *corev1.Pod
	at  time.Time
}

// tombstoneTTL bounds how long a deleted pod's last state is kept.
const tombstoneTTL = 10 * time.Minute

func newPodCache(client kubernetes.Interface, resync time.Duration, namespaces []string) *podCache {
	return &podCache{client: client, resync: resync, namespaces: namespaces, stop: make(chan struct{}), changed: make(chan struct{})}
}

// start starts the informers once; it does not wait for them to sync.
func (c *podCache) start() {
	c.startOnce.Do(func() {
		select {
		case <-c.stop:
			return // closed before first use
		default:
		}
		namespaces := c.namespaces
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		scopes := make(map[string]*cacheScope, len(namespaces))
		for _, ns := range namespaces {
			scopes[ns] = c.newScope(ns)
		}
		c.scopes = scopes
	})
}

// newScope starts the informers of namespace ns (metav1.NamespaceAll: every namespace).
func (c *podCache) newScope(ns string) *cacheScope {
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, c.resync,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue}).String()
		}),
		informers.WithTransform(stripManagedFields),
	)
	s := &cacheScope{factory: factory}
	s.pods = factory.Core().V1().Pods().Informer()
	_ = s.pods.AddIndexers(cache.Indexers{gangIndex: func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil //nolint:nilerr // an object without metadata is in no gang
		}
		return []string{m.GetNamespace() + "/" + m.GetLabels()[LabelGang]}, nil
	}})
	s.services = factory.Core().V1().Services().Informer()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.notifyGang(o); c.notify() },
		UpdateFunc: func(_, o any) { c.notifyGang(o); c.notify() },
		DeleteFunc: func(o any) { c.notifyGang(o); c.notify() },
	}
	_, _ = s.pods.AddEventHandler(h)
	_, _ = s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.remember})
	_, _ = s.services.AddEventHandler(h)
	factory.Start(c.stop)
	return s
}

// scope returns the informers that hold namespace ns's objects, nil when none does
// (not started, or a namespace the worker does not watch).
func (c *podCache) scope(ns string) *cacheScope {
	c.start()
	if s := c.scopes[metav1.NamespaceAll]; s != nil {
		return s
	}
	return c.scopes[ns]
}

func (c *podCache) close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.startOnce.Do(func() {}) // a later start does nothing
		for _, s := range c.scopes {
			s.factory.Shutdown()
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

// synced reports whether the informers holding namespace ns have synced; with no
// namespace, whether every informer has.
func (c *podCache) synced(ns ...string) bool {
	c.start()
	if len(ns) == 0 {
		for _, s := range c.scopes {
			if !s.synced() {
				return false
			}
		}
		return len(c.scopes) > 0
	}
	s := c.scope(ns[0])
	return s != nil && s.synced()
}

func (s *cacheScope) synced() bool { return s.pods.HasSynced() && s.services.HasSynced() }

// service returns the named Service, nil if it does not exist.
func (c *podCache) service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return cachedGet(ctx, c, func(s *cacheScope) cache.Store { return s.services.GetStore() },
		c.client.CoreV1().Services(ns).Get, "service", ns, name)
}

// pod returns the named pod, nil if it does not exist.
func (c *podCache) pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return cachedGet(ctx, c, func(s *cacheScope) cache.Store { return s.pods.GetStore() },
		c.client.CoreV1().Pods(ns).Get, "pod", ns, name)
}

// cachedGet returns the object ns/name from the store once the cache has synced, else
// (or on a miss) from the API server with get; nil if it does not exist. kind names the
// object in errors.
func cachedGet[T any](ctx context.Context, c *podCache, store func(*cacheScope) cache.Store,
	get func(context.Context, string, metav1.GetOptions) (*T, error), kind, ns, name string,
) (*T, error) {
	if c.synced(ns) {
		if obj, ok, err := store(c.scope(ns)).GetByKey(ns + "/" + name); err == nil && ok {
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
	if !c.synced(ns) {
		return nil, false
	}
	objs, err := c.scope(ns).pods.GetIndexer().ByIndex(gangIndex, ns+"/"+gangValue(ref))
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
