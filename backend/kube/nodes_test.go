package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// With no node-lost grace, a replica on a node that stops reporting is failed as
// NodeLost at once, without waiting for Kubernetes to evict it; replicas on healthy
// nodes are untouched.
func TestObserveFailsReplicasOfALostNode(t *testing.T) {
	cs := newClient()
	ctx := context.Background()
	for name, ready := range map[string]corev1.ConditionStatus{"node-a": corev1.ConditionTrue, "node-b": corev1.ConditionTrue} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBackend(t, cs, WithNodeLostGrace(0))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	waitSynced(t, b)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{Phase: corev1.PodRunning}, "node-a")
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", corev1.PodStatus{Phase: corev1.PodRunning}, "node-b")
	setPodStatus(t, cs, "vision", "resnet-worker-1-a1", corev1.PodStatus{Phase: corev1.PodRunning}, "node-b")
	testutil.Eventually(t, 10*time.Second, "every replica running", func() bool {
		for _, r := range observe(t, b, g.GangRef) {
			if r.Phase != schemas.ReplicaRunning {
				return false
			}
		}
		return true
	})

	n, err := cs.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the replicas of node-b to be lost", func() bool {
		reps := observe(t, b, g.GangRef)
		return reps[1].Reason == schemas.FailureNodeLost && reps[2].Reason == schemas.FailureNodeLost
	})
	reps := observe(t, b, g.GangRef)
	if reps[0].Phase != schemas.ReplicaRunning {
		t.Errorf("replica on the healthy node: %s %s", reps[0].Phase, reps[0].Message)
	}
	if reps[1].Phase != schemas.ReplicaFailed || !strings.Contains(reps[1].Message, "node node-b is not ready") {
		t.Errorf("replica on the lost node: %s %q", reps[1].Phase, reps[1].Message)
	}
}
