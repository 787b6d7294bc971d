package kube

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/schemas"
)

// Transient and permanent faults. Some faults go away on their own: a registry that
// times out or rate-limits a pull, a node whose kubelet misses a few heartbeats. Failing
// a job at the first sign of them kills a nightly run for a hiccup, so they are given a
// window: an image pull that keeps failing is failed as ImagePull only once it has failed
// for the image pull grace, and the replicas of a node that is not Ready are failed as
// NodeLost only once it has been so for the node-lost grace. Faults that cannot go away
// still fail at once: an image name the kubelet cannot parse, a missing image under pull
// policy Never, and a pull the registry answers with "no such image".

// Defaults of the grace options.
const (
	// DefaultImagePullGrace is how long a replica's image pull may keep failing
	// (ErrImagePull, ImagePullBackOff, RegistryUnavailable) before the replica fails as
	// ImagePull: long enough for the kubelet's back-off (10s doubling to 5m) to retry
	// several times through a registry outage or rate limit.
	DefaultImagePullGrace = 5 * time.Minute
	// DefaultNodeLostGrace is how long a node may stay not Ready (NotReady, or Unknown
	// once the node lifecycle controller stops hearing from it) before the replicas on
	// it fail as NodeLost. Kubernetes itself marks a silent node Unknown after its
	// node-monitor-grace-period (50s by default) and evicts its pods 300s later.
	DefaultNodeLostGrace = time.Minute
)

// pullTrackerTTL is how long a pod's first pull failure is remembered after it was last
// seen failing: a pod nobody observes any more is forgotten.
const pullTrackerTTL = 30 * time.Minute

// transientConfig holds the grace periods and what they need to measure.
type transientConfig struct {
	imagePullGrace time.Duration
	nodeLostGrace  time.Duration
	pulls          pullTracker
}

// WithImagePullGrace sets how long a replica's image pull may keep failing before the
// replica fails as ImagePull, measured from the first pull error this worker saw for
// that pod (a worker that restarts starts the window again: it never fails a replica
// sooner than the window, possibly later). A pull the registry answers with "not found",
// "manifest unknown" or "repository does not exist", an invalid image name, an image
// absent under pull policy Never, and a failed signature check fail at once whatever
// the window. 0 fails at the first pull error. Default: DefaultImagePullGrace.
func WithImagePullGrace(d time.Duration) Option {
	return func(b *Backend) error {
		if d < 0 {
			return fmt.Errorf("kube: negative image pull grace %v", d)
		}
		b.transient.imagePullGrace = d
		return nil
	}
}

// WithNodeLostGrace sets how long a node may stay not Ready before the replicas on it
// fail as NodeLost, measured from the later of the Ready condition's last transition
// and the moment this worker first saw the node not Ready. A node Ready again within
// the grace fails nothing. 0 fails them as soon as the node is not Ready. Default:
// DefaultNodeLostGrace.
func WithNodeLostGrace(d time.Duration) Option {
	return func(b *Backend) error {
		if d < 0 {
			return fmt.Errorf("kube: negative node-lost grace %v", d)
		}
		b.transient.nodeLostGrace = d
		return nil
	}
}

// pullWaitingReasons are the waiting reasons of a container whose image pull failed in
// a way that may resolve: ErrImagePull and RegistryUnavailable are a failed pull,
// ImagePullBackOff the kubelet waiting before it tries again.
var pullWaitingReasons = map[string]bool{
	"ErrImagePull":        true,
	"ImagePullBackOff":    true,
	"RegistryUnavailable": true,
}

// imageMissingMarkers are what a pull error says when the registry reports that the
// image does not exist, in the messages of containerd ("<ref>: not found", gRPC code
// NotFound), CRI-O and other containers/image users ("manifest unknown", "name
// unknown"), and Docker Hub's answer for a repository that does not exist ("pull access
// denied, repository does not exist or may require authorization"). The kubelet's
// ImagePullBackOff message repeats the last pull error after "Back-off pulling image".
var imageMissingMarkers = []string{
	"not found",
	"notfound",
	"manifest unknown",
	"name unknown",
	"repository does not exist",
}

// imageMissing reports whether a pull error message says the image does not exist.
func imageMissing(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range imageMissingMarkers {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// pullTracker remembers when this Backend first saw each pod's image pull fail.
type pullTracker struct {
	mu    sync.Mutex
	first map[types.UID]pullSeen
}

type pullSeen struct{ first, last time.Time }

// seen records a pull failure of pod uid at now and returns when the first was seen.
func (p *pullTracker) seen(uid types.UID, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == nil {
		p.first = map[types.UID]pullSeen{}
	}
	for k, s := range p.first {
		if now.Sub(s.last) > pullTrackerTTL {
			delete(p.first, k)
		}
	}
	s, ok := p.first[uid]
	if !ok {
		s.first = now
	}
	s.last = now
	p.first[uid] = s
	return s.first
}

// forget drops pod uid: its pull no longer fails.
func (p *pullTracker) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.first, uid)
}

// applyPullGrace decides a pending replica whose image pull fails: Failed (ImagePull)
// at once when the registry says the image does not exist, or once the pull has failed
// for the image pull grace; Pending, with how long it has been failing, until then.
func (b *Backend) applyPullGrace(s *schemas.ReplicaStatus, pod *corev1.Pod) {
	if pod == nil || s.Phase != schemas.ReplicaPending {
		if pod != nil {
			b.transient.pulls.forget(pod.UID)
		}
		return
	}
	cs := mainStatus(pod)
	if cs == nil || cs.State.Waiting == nil || !pullWaitingReasons[cs.State.Waiting.Reason] {
		b.transient.pulls.forget(pod.UID)
		return
	}
	w := cs.State.Waiting
	if imageMissing(w.Message) {
		s.Phase, s.Reason = schemas.ReplicaFailed, schemas.FailureImagePull
		s.Message = "the registry reports the image does not exist: " + joinReason(w.Reason, w.Message)
		return
	}
	now := b.clock.Now()
	failing := now.Sub(b.transient.pulls.seen(pod.UID, now))
	grace := b.transient.imagePullGrace
	if failing >= grace {
		s.Phase, s.Reason = schemas.ReplicaFailed, schemas.FailureImagePull
		s.Message = fmt.Sprintf("image pull failing for %s (image pull grace %s): %s",
			failing.Round(time.Second), grace, joinReason(w.Reason, w.Message))
		return
	}
	s.Message = fmt.Sprintf("%s (image pull failing for %s; retried until %s)",
		joinReason(w.Reason, w.Message), failing.Round(time.Second), grace)
}

// notReady tracks, from the node informer's events, when this process first saw each
// node not Ready.
type notReady struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// observe records node's readiness at now.
func (n *notReady) observe(node *corev1.Node, now time.Time) {
	ready := nodeReadyCondition(node)
	n.mu.Lock()
	defer n.mu.Unlock()
	if ready != nil && ready.Status == corev1.ConditionTrue {
		delete(n.since, node.Name)
		return
	}
	if n.since == nil {
		n.since = map[string]time.Time{}
	}
	if _, ok := n.since[node.Name]; !ok {
		n.since[node.Name] = now
	}
}

// forget drops a deleted node.
func (n *notReady) forget(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.since, name)
}

// firstSeen is when node was first seen not Ready, or now if never.
func (n *notReady) firstSeen(name string, now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t, ok := n.since[name]; ok {
		return t
	}
	return now
}

// nodeEvent records a node informer event's node in the not-ready tracker.
func (c *nodeCache) nodeEvent(obj any, deleted bool) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if deleted {
		c.notReady.forget(node.Name)
		return
	}
	c.notReady.observe(node, c.now())
}

func (c *nodeCache) now() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

func nodeReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// notReadyFor is how long node has been not Ready: since the later of its Ready
// condition's last transition and the moment this process first saw it not Ready (a
// simulated or misreporting node can carry an old transition time).
func (c *nodeCache) notReadyFor(node string, cond *corev1.NodeCondition) time.Duration {
	now := c.now()
	since := c.notReady.firstSeen(node, now)
	if t := cond.LastTransitionTime.Time; t.After(since) && !t.After(now) {
		since = t
	}
	return now.Sub(since)
}

// onLostNode reports whether pod's node has been not Ready for the node-lost grace: the
// node whose replicas Observe fails as NodeLost. Stop deletes such a pod with no grace,
// since no kubelet will confirm its end, rather than waiting out the grace period and
// forceAfter first; the node, if it comes back, kills the container itself, as its
// pod is gone.
func (b *Backend) onLostNode(pod *corev1.Pod) bool {
	lost, since, _ := b.nodes.lost(pod.Spec.NodeName)
	return lost && since >= b.transient.nodeLostGrace
}
