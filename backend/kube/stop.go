package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/opendlc/opendlc/backend"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// forceAfter is how long past the grace period Stop waits for a deleted pod to go before
// deleting it with no grace. A pod outlives its grace period when nobody confirms its
// end: its node is down, so only a forced delete frees its name and quota. A pod whose
// node has been not Ready for the node-lost grace is deleted with no grace at once.
const forceAfter = 15 * time.Second

// Stop marks the gang stopped, deletes every pod that has not finished, and waits (as
// long as ctx allows) until they are gone. Pods that finished on their own are kept
// until Cleanup, so their phase, exit code and logs outlive the stop. The mark is set
// on the Service before any pod is deleted: Observe then reports Stopped, and a Launch
// retried later (by any worker) creates nothing. Stopping an unknown or finished gang
// does nothing.
func (b *Backend) Stop(ctx context.Context, ref backend.GangRef) error {
	b.cache.start()
	id := ref.ID()
	l := b.lockGang(id)
	defer l.Unlock()
	b.markStopped(id)

	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return nil // nothing of the worker's can be there
	}
	if _, err := b.annotateService(ctx, ns, serviceName(ref), AnnotationStopped); err != nil {
		return err
	}
	start := b.clock.Now()
	forced := false
	for {
		// Watch for changes before reading, so a change between the read and the wait
		// is not missed.
		changed := b.changesOf(ns, ref)
		grace := b.grace
		if !forced && b.clock.Since(start) >= b.grace+forceAfter {
			grace, forced = 0, true
		}
		left, err := b.deleteRunning(ctx, ns, ref, grace)
		if err != nil {
			return err
		}
		if left == 0 {
			// Nothing of the gang is left to place: free its PodGroup (a Volcano
			// queue counts an unfinished group against its capacity).
			return b.deleteGangGroups(ctx, ns, ref)
		}
		// Wait on the cache, which costs nothing to read, and go back to the server
		// (which also deletes any pod a racing Launch created) once the cache sees
		// every pod gone, or when it is time to force.
		for {
			if err := b.wait(ctx, changed, b.poll); err != nil {
				return fmt.Errorf("kube: stop %s: %d pods still terminating: %w", id, left, err)
			}
			changed = b.changesOf(ns, ref)
			pods, ok := b.cache.cachedGangPods(ns, ref)
			if !ok || countRunning(pods) == 0 || (!forced && b.clock.Since(start) >= b.grace+forceAfter) {
				break
			}
		}
	}
}

// countRunning counts the pods Stop waits for: those not finished on their own, and
// those being deleted.
func countRunning(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
			n++
		}
	}
	return n
}

// deleteRunning deletes the gang's pods that have not finished (with the given grace
// period unless one is being deleted already) and returns how many of those, and of the
// pods already being deleted, still exist.
func (b *Backend) deleteRunning(ctx context.Context, ns string, ref backend.GangRef, grace time.Duration) (int, error) {
	pods, err := listGangPods(ctx, b.client, ns, ref)
	if err != nil {
		return 0, err
	}
	left := 0
	var doomed []*corev1.Pod
	graces := map[*corev1.Pod]time.Duration{}
	for _, p := range pods {
		g := grace
		if g > 0 && b.onLostNode(p) {
			g = 0 // no kubelet is there to confirm the kill (transient.go)
		}
		switch {
		case p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed):
			continue // ended on its own: keep it for Observe and FollowLogs
		case p.DeletionTimestamp != nil && g > 0:
			left++ // already going; deleting again changes nothing
			continue
		}
		left++
		doomed = append(doomed, p)
		graces[p] = g
	}
	// As many deletions in flight as Launch has creations: a 256-pod gang is not
	// stopped one round trip at a time.
	if err := forEachPod(doomed, CreateParallelism, func(p *corev1.Pod) error { return b.deletePod(ctx, p, graces[p]) }); err != nil {
		return 0, err
	}
	return left, nil
}

// deletePod deletes a pod with a grace period, NotFound counting as done. The UID
// precondition makes sure a pod recreated under the same name is never hit.
func (b *Backend) deletePod(ctx context.Context, p *corev1.Pod, grace time.Duration) error {
	secs := int64(grace.Seconds())
	err := b.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &secs,
		Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("kube: delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// Cleanup deletes the gang's Service and its pods. Background propagation: the call
// returns at once and the garbage collector deletes whatever the Service owns; the pods
// are deleted directly too, so nothing is left even where the garbage collector is slow
// or absent. It does not wait for the pods to go. The namespace stays: it is the
// workspace's, shared with its other jobs.
func (b *Backend) Cleanup(ctx context.Context, ref backend.GangRef) error {
	id := ref.ID()
	l := b.lockGang(id)
	defer l.Unlock()
	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return nil // nothing of the worker's can be there
	}
	policy := metav1.DeletePropagationBackground
	err := b.client.CoreV1().Services(ns).Delete(ctx, serviceName(ref), metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete service %s/%s: %w", ns, serviceName(ref), err)
	}
	if err := b.deleteGangGroups(ctx, ns, ref); err != nil {
		return err
	}
	pods, err := listGangPods(ctx, b.client, ns, ref)
	if err != nil {
		return err
	}
	var doomed []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			doomed = append(doomed, p)
		}
	}
	if err := forEachPod(doomed, CreateParallelism, func(p *corev1.Pod) error { return b.deletePod(ctx, p, b.grace) }); err != nil {
		return err
	}
	b.forgetGang(id)
	return nil
}

// wait returns when changed closes, d passes or ctx ends (with its error).
func (b *Backend) wait(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C():
	}
	return nil
}
