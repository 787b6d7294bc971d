package kubestack

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/internal/testutil"
)

// A node whose heartbeat is stopped goes Unknown by the node lifecycle controller's
// hand (reason NodeStatusUnknown) and is tainted unreachable, its lease no longer
// renewed; given back, kwok renews the lease again and the node is Ready and
// untainted.
func TestStopNodeHeartbeat(t *testing.T) {
	ctx := testContext(t)
	node := cluster.Nodes[0]
	leases := cluster.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	if err := cluster.StopNodeHeartbeat(ctx, node); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resumed := false
	t.Cleanup(func() {
		if resumed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.ResumeNodeHeartbeat(ctx, node); err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, time.Minute, "node "+node+" Unknown and unreachable", func() error {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var ready corev1.NodeCondition
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c
			}
		}
		if ready.Status != corev1.ConditionUnknown || ready.Reason != "NodeStatusUnknown" {
			return fmt.Errorf("Ready %s %s", ready.Status, ready.Reason)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable {
				return nil
			}
		}
		return errors.New("not tainted unreachable yet")
	})
	t.Logf("Unknown and unreachable %s after StopNodeHeartbeat", time.Since(start).Round(time.Millisecond))
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h == nil || *h != HeartbeatStoppedHolder {
		t.Errorf("lease holder %v, want %s", h, HeartbeatStoppedHolder)
	}

	if err := cluster.ResumeNodeHeartbeat(ctx, node); err != nil {
		t.Fatal(err)
	}
	resumed = true
	l, err = leases.Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h == nil || *h == HeartbeatStoppedHolder {
		t.Errorf("lease holder after resuming %v, want kwok", h)
	}
}
