package kubestack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// HeartbeatStoppedHolder is the holder StopNodeHeartbeat writes into a node's Lease.
const HeartbeatStoppedHolder = "kubestack-heartbeat-stopped"

// stoppedLeaseDuration is the lease duration StopNodeHeartbeat claims: kwok takes a
// lease held by someone else back only once it has expired.
const stoppedLeaseDuration = 24 * time.Hour

// StopNodeHeartbeat makes node fall silent, as a node whose kubelet died or lost the
// network: kwok stops renewing its Lease in kube-node-lease and stops acting on it and
// its pods. The node lifecycle controller then marks the node's conditions Unknown
// (reason NodeStatusUnknown, "Kubelet stopped posting node status.") once
// Options.NodeMonitorGracePeriod has passed since the last renewal, and taints it
// node.kubernetes.io/unreachable.
//
// kwok renews only the leases it holds, and takes over another holder's lease only
// once it has expired, so the lease is given to HeartbeatStoppedHolder with a duration
// of a day, its renew time left as kwok last wrote it. (Removing kwok's node
// annotation would not do: kwok v0.8.0 filters events by the annotation, so it never
// hears that the node left its care.) ResumeNodeHeartbeat undoes it.
func (c *Cluster) StopNodeHeartbeat(ctx context.Context, node string) error {
	leases := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		holder, secs := HeartbeatStoppedHolder, int32(stoppedLeaseDuration/time.Second)
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &secs
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubestack: stop the heartbeat of node %s: %w", node, err)
	}
	return nil
}

// ResumeNodeHeartbeat gives node back to kwok after StopNodeHeartbeat: it deletes the
// node's Lease, which kwok creates again and renews; kwok then reports the node Ready
// and the controller manager lifts its taints. It returns once the node is Ready and
// untainted.
func (c *Cluster) ResumeNodeHeartbeat(ctx context.Context, node string) error {
	err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubestack: resume the heartbeat of node %s: %w", node, err)
	}
	return c.pollUntil(ctx, "node "+node+" Ready and untainted", func(ctx context.Context) error {
		return c.nodeUsable(ctx, node)
	})
}
