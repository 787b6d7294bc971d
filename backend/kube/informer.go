package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/opendlc/opendlc/backend"
)

// Per-gang change notification. The worker's informers (podCache) are shared by every
// job it runs; a waiter on podCache.changes wakes at every event of every gang, which
// at a thousand running jobs is a thousand wake-ups per pod event. A waiter on
// gangChanges wakes only at events of its own gang's pods and Service, so the cost of
// watching N jobs is one watch per resource on the API server and O(events) wake-ups
// in the worker, whatever N.

// gangKey is how the cache names a gang: its namespace and gang label.
func gangKey(ns, gang string) string { return ns + "/" + gang }

// gangChanges returns a channel that is closed at the next informer event of the
// gang's pods or Service (namespace ns, gang label gang). Take it before reading the
// cache, so that a change between the read and the wait is not missed.
func (c *podCache) gangChanges(ns, gang string) <-chan struct{} {
	c.start()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gangWaiters == nil {
		c.gangWaiters = map[string]chan struct{}{}
	}
	k := gangKey(ns, gang)
	ch, ok := c.gangWaiters[k]
	if !ok {
		ch = make(chan struct{})
		c.gangWaiters[k] = ch
	}
	return ch
}

// notifyGang wakes the waiters of the gang obj (a pod or Service, or a deletion
// tombstone of one) belongs to. A channel nobody waits on is made only on demand, so
// events of gangs nobody watches cost a map lookup.
func (c *podCache) notifyGang(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	gang, ok := m.GetLabels()[LabelGang]
	if !ok {
		return
	}
	k := gangKey(m.GetNamespace(), gang)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.gangWaiters[k]; ok {
		close(ch)
		delete(c.gangWaiters, k)
	}
}

// GangChanges implements backend.ChangeNotifier: the returned channel is closed at
// the next event of the gang's pods or Service seen by the worker's shared informers.
// It may close for a change that does not alter the gang's status; callers observe
// again and compare.
func (b *Backend) GangChanges(ref backend.GangRef) <-chan struct{} {
	return b.cache.gangChanges(b.namespaceOf(ref), gangValue(ref))
}

// changesOf is gangChanges for ref, for the backend's own waits (logs, stop).
func (b *Backend) changesOf(ns string, ref backend.GangRef) <-chan struct{} {
	return b.cache.gangChanges(ns, gangValue(ref))
}
