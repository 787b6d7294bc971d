package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/kubestack"
)

// benchNodeLostGrace is the node-lost grace of the bench's backend (kube.WithNodeLostGrace):
// how long a node stays not Ready before its replicas fail as NodeLost.
const benchNodeLostGrace = 10 * time.Second

// leaseRun is one lease-expiry recovery, measured from the moment kwok stopped renewing
// the node's Lease and from the moment the controller manager marked the node Unknown.
type leaseRun struct {
	fromStop, fromUnknown, unknownAfter time.Duration
}

// runKubeLeaseExpiry stops the heartbeat of the node under pod 0 of a running
// 2-replica job, n times: kwok stops renewing the node's Lease, the node lifecycle
// controller marks the node Unknown after its node monitor grace period, OpenDLC fails
// the node's replicas as NodeLost after the node-lost grace and restarts the job on the
// other nodes. Each run times fault -> both replacement pods Running, and gives the node
// back before the next.
func runKubeLeaseExpiry(ctx context.Context, cluster *kubestack.Cluster, c *client.Client, n int) error {
	if n <= 0 {
		return nil
	}
	cs := cluster.Client
	var runs []leaseRun
	for i := range n {
		var node string
		var stopped time.Time
		unknownAt := make(chan time.Time, 1)
		took, err := kubeJobFault(ctx, cs, c, fmt.Sprintf("bench-rec-lease-%d", i), func(p corev1.Pod) error {
			node = p.Spec.NodeName
			return cluster.StopNodeHeartbeat(ctx, node)
		}, func(start time.Time) {
			stopped = start
			go func() {
				// The node really goes Unknown, by the controller: the fault happened.
				var at time.Time
				_ = poll(ctx, 20*time.Millisecond, func() (bool, error) {
					n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
					if err != nil {
						return false, nil //nolint:nilerr // a failed poll is retried until ctx ends
					}
					for _, c := range n.Status.Conditions {
						if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown && c.Reason == "NodeStatusUnknown" {
							at = time.Now()
							return true, nil
						}
					}
					return false, nil
				})
				unknownAt <- at
			}()
		})
		if err != nil {
			return fmt.Errorf("lease expiry %d: %w", i, err)
		}
		at := <-unknownAt
		if at.IsZero() {
			return fmt.Errorf("lease expiry %d: node %s never went Unknown", i, node)
		}
		runs = append(runs, leaseRun{fromStop: took, fromUnknown: stopped.Add(took).Sub(at), unknownAfter: at.Sub(stopped)})
		if err := cluster.ResumeNodeHeartbeat(ctx, node); err != nil {
			return err
		}
	}
	pick := func(f func(leaseRun) time.Duration) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, f(r))
		}
		return out
	}
	fmt.Printf("\nRecovery from a lost node heartbeat on the kwok control plane: kwok stops renewing the node's Lease,\n")
	fmt.Printf("the node lifecycle controller marks it Unknown (node monitor grace period %s), OpenDLC fails its\n", kubestack.DefaultNodeMonitorGracePeriod)
	fmt.Printf("replicas as NodeLost after the node-lost grace (%s) and restarts the 2-replica job; %d runs\n\n", benchNodeLostGrace, n)
	fmt.Printf("%-58s %10s %10s %10s\n", "measure", "min", "median", "max")
	row := func(name string, xs []time.Duration) {
		fmt.Printf("%-58s %10s %10s %10s\n", name, pct(xs, 0).Round(10*time.Millisecond),
			pct(xs, 50).Round(10*time.Millisecond), pct(xs, 100).Round(10*time.Millisecond))
	}
	row("lease stopped -> node Unknown (controller)", pick(func(r leaseRun) time.Duration { return r.unknownAfter }))
	row("node Unknown -> replacement pods Running", pick(func(r leaseRun) time.Duration { return r.fromUnknown }))
	row("lease stopped -> replacement pods Running (fault -> Running)", pick(func(r leaseRun) time.Duration { return r.fromStop }))
	return nil
}
