package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Node eligibility: which nodes a pod may be scheduled on, by the scheduler's own
// rules (k8s.io/component-helpers): its node selector and required node affinity
// match the node, and it tolerates every taint of the node that counts. Both the fit
// check before Launch (placement.go) and the nodes a pre-flight health check probes
// (health.go) go by eligibleNodes; they differ only in which taints count.

// lastingTaint reports whether t keeps pods off its node for as long as it is there:
// a NoSchedule or NoExecute taint that does not only say the node is unwell for now
// (transientTaintPrefix).
func lastingTaint(t *corev1.Taint) bool {
	return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
		!strings.HasPrefix(t.Key, transientTaintPrefix)
}

// eligibleNodes returns the nodes, in their order, whose labels and fields match p's
// node selector and required node affinity and whose taints counted by counts p
// tolerates. Whether a node is cordoned, and what it has room for, are the callers'.
func eligibleNodes(p *corev1.Pod, nodes []*corev1.Node, counts func(*corev1.Taint) bool) []*corev1.Node {
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	var out []*corev1.Node
	for _, n := range nodes {
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations, counts, false); untolerated {
			continue
		}
		out = append(out, n)
	}
	return out
}
