package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Gang placement on Kubernetes.
//
// The placement timeout of a pool's jobs is PoolConfig.PlacementTimeout (zero:
// backend.DefaultPlacementTimeout; negative: none); a job's own
// spec.resources.placementTimeout wins. A replica counts as placed once its pod is
// bound to a node (spec.nodeName set, PodScheduled=True): Observe reports that node
// while the pod is still Pending, pulling its image.
//
// Before a gang's first pod is created, Launch checks that the gang can fit the nodes
// its pods may use, were those nodes empty: per replica, the nodes its node selector,
// node affinity (the excluded nodes) and tolerations admit, less cordoned ones; per
// node, its allocatable resources, whatever runs there now. When it cannot — a replica
// asks more than any node has, or the replicas more than the nodes together hold —
// Launch creates nothing and returns a backend.ErrUnschedulable error naming what is
// short; the job waits Queued and tries again later. The check only proves what
// cannot fit (a bound no packing can beat), so a gang it lets through may still wait
// for the scheduler; the placement timeout covers that. Pools whose nodes come on
// demand (a cluster autoscaler) skip it: PoolConfig.Autoscaled.

// PlacementTimeout is the placement timeout of pool's jobs that set none: the pool's
// PoolConfig.PlacementTimeout, else backend.DefaultPlacementTimeout; zero for none.
func (b *Backend) PlacementTimeout(pool schemas.Pool) time.Duration {
	switch d := b.pools[pool].PlacementTimeout; {
	case d < 0:
		return 0
	case d > 0:
		return d
	}
	return backend.DefaultPlacementTimeout
}

// transientTaintPrefix starts the keys of the taints Kubernetes puts on a node while a
// condition lasts (not-ready, unreachable, memory-pressure...): the fit check ignores
// them, as a node that recovers takes pods again. Cordoned nodes are left out by
// spec.unschedulable instead.
const transientTaintPrefix = "node.kubernetes.io/"

// checkFit returns a backend.ErrUnschedulable error when the gang's pods cannot fit
// the nodes they may use even were those empty, or the error reading the gang's
// Service. It checks nothing for a gang already launched (its Service exists), for an autoscaled pool, or when the nodes cannot be
// listed (the worker may lack the permission), none is there, or one has not reported
// its allocatable resources yet (just registered): the placement timeout still applies.
// A pool whose gangs go to a batch scheduler is not checked either: that scheduler
// decides when a gang is admitted.
func (b *Backend) checkFit(ctx context.Context, g backend.GangSpec, ns string, build func(*corev1.Service) []*corev1.Pod) error {
	if b.pools[g.Pool].Autoscaled || b.batchFor(g.Pool).Scheduler != GangSchedulerOpenDLC {
		// Nodes come on demand, or the cluster's batch scheduler admits the gang and
		// holds it until room appears (Kueue, Volcano and coscheduling queue it).
		return nil
	}
	name := serviceName(g.GangRef)
	svc, err := b.cache.service(ctx, ns, name)
	if err != nil {
		return err // retried, as Launch's own read of the Service would be
	}
	if svc != nil {
		return nil // launched before: its pods are the scheduler's now
	}
	nodes, err := b.nodes.list(ctx)
	if err != nil {
		b.logger.Warn("kube: cannot list nodes to check that the gang fits", "gang", g.ID(), "error", err)
		return nil
	}
	if len(nodes) == 0 || !allReported(nodes) {
		return nil // no node visible, or one that has not said what it holds: nothing to judge by
	}
	pods := build(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	pool := g.Pool
	if pool == "" {
		pool = schemas.PoolQuota
	}
	if msg := cannotFit(pods, nodes, string(pool)); msg != "" {
		return backend.Unschedulable(errors.New(msg))
	}
	return nil
}

// list returns every node: from the informer once it has synced, else from the API
// server.
func (c *nodeCache) list(ctx context.Context) ([]*corev1.Node, error) {
	c.start()
	if c.nodes != nil && c.nodes.HasSynced() {
		var out []*corev1.Node
		for _, obj := range c.nodes.GetStore().List() {
			out = append(out, obj.(*corev1.Node))
		}
		return out, nil
	}
	l, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

// fitGroup is the replicas with the same requests and the same usable nodes.
type fitGroup struct {
	pods  []*corev1.Pod
	req   corev1.ResourceList
	nodes []*corev1.Node
}

// cannotFit says why pods cannot all be placed on nodes (which have all reported their
// allocatable resources) were those empty, or "" when no bound proves it: per group of alike replicas, how many of them each usable node
// can hold; then, per resource, the replicas' total against the usable nodes'.
func cannotFit(pods []*corev1.Pod, nodes []*corev1.Node, pool string) string {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	var groups []*fitGroup
	byKey := map[string]*fitGroup{}
	for _, p := range pods {
		req := podRequests(p)
		usable := usableNodes(p, nodes)
		key := requestsKey(req) + "|" + nodeNames(usable)
		if g := byKey[key]; g != nil {
			g.pods = append(g.pods, p)
			continue
		}
		g := &fitGroup{pods: []*corev1.Pod{p}, req: req, nodes: usable}
		byKey[key] = g
		groups = append(groups, g)
	}
	for _, g := range groups {
		if msg := g.cannotFit(pool); msg != "" {
			return msg
		}
	}
	if len(groups) > 1 {
		return totalCannotFit(groups, pool)
	}
	return ""
}

// cannotFit says why the group's replicas cannot fit its nodes, or "".
func (g *fitGroup) cannotFit(pool string) string {
	n := len(g.pods)
	who := describeReplicas(g.pods)
	if len(g.nodes) == 0 {
		return fmt.Sprintf("cannot fit: no node of the cluster admits %s of pool %s "+
			"(node selector, tolerations, excluded, cordoned or quarantined nodes)", who, pool)
	}
	room, largest := 0, 0
	for _, node := range g.nodes {
		k := holds(node, g.req, "")
		room, largest = room+k, max(largest, k)
	}
	if room >= n {
		return ""
	}
	if largest == 0 {
		// Not one replica fits any node: say which resources no node has enough of.
		var short []string
		for _, r := range sortedResources(g.req) {
			if roomFor(g.nodes, g.req, r) == 0 || maxHolds(g.nodes, g.req, r) == 0 {
				q := g.req[r]
				short = append(short, fmt.Sprintf("%s %s (%s)", r, q.String(), perNode(g.nodes, r)))
			}
		}
		return fmt.Sprintf("cannot fit even on empty nodes: %s %s %s%s, more than any of the %d nodes %s may use in pool %s has: %s",
			who, needs(n), describeRequests(g.req), each(n), len(g.nodes), they(n), pool, strings.Join(short, "; "))
	}
	var short []string
	for _, r := range sortedResources(g.req) {
		if roomFor(g.nodes, g.req, r) >= n {
			continue
		}
		need := g.req[r].DeepCopy()
		need.Mul(int64(n))
		have := sumAllocatable(g.nodes, r)
		short = append(short, fmt.Sprintf("%s: %s needed, %s allocatable (%s)",
			r, need.String(), have.String(), perNode(g.nodes, r)))
	}
	msg := fmt.Sprintf("cannot fit even on empty nodes: %s %s %s%s; the %d nodes %s may use in pool %s have room for %d",
		who, needs(n), describeRequests(g.req), each(n), len(g.nodes), they(n), pool, room)
	if len(short) > 0 {
		msg += "; short of " + strings.Join(short, "; ")
	}
	return msg
}

// totalCannotFit compares, per resource, every replica's request with what the nodes
// any of them may use hold together.
func totalCannotFit(groups []*fitGroup, pool string) string {
	need := corev1.ResourceList{}
	seen := map[string]bool{}
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for _, g := range groups {
		for _, p := range g.pods {
			pods = append(pods, p)
			for r, q := range g.req {
				sum := need[r]
				sum.Add(q)
				need[r] = sum
			}
		}
		for _, node := range g.nodes {
			if !seen[node.Name] {
				seen[node.Name] = true
				nodes = append(nodes, node)
			}
		}
	}
	var short []string
	for _, r := range sortedResources(need) {
		have := sumAllocatable(nodes, r)
		if q := need[r]; q.Cmp(have) > 0 {
			short = append(short, fmt.Sprintf("%s: %s needed, %s allocatable (%s)", r, q.String(), have.String(), perNode(nodes, r)))
		}
	}
	if len(short) == 0 {
		return ""
	}
	return fmt.Sprintf("cannot fit even on empty nodes: %s need more than the %d nodes they may use in pool %s hold; short of %s",
		describeReplicas(pods), len(nodes), pool, strings.Join(short, "; "))
}

// allReported reports whether every node has reported its allocatable resources (a
// node just registered has not).
func allReported(nodes []*corev1.Node) bool {
	for _, n := range nodes {
		if len(n.Status.Allocatable) == 0 {
			return false
		}
	}
	return true
}

// needs, each and they agree with a count of replicas.
func needs(n int) string { return plural(n, "needs", "need") }
func each(n int) string  { return plural(n, "", " each") }
func they(n int) string  { return plural(n, "it", "they") }

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// podRequests is what the scheduler reserves for the pod: its effective requests and
// one pod slot.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	req := corev1.ResourceList{}
	for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		if q.Sign() > 0 {
			req[r] = q
		}
	}
	req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return req
}

// usableNodes are the nodes the pod may be scheduled on: not cordoned, and eligible
// (eligibleNodes) by every lasting taint.
func usableNodes(p *corev1.Pod, nodes []*corev1.Node) []*corev1.Node {
	var schedulable []*corev1.Node
	for _, n := range nodes {
		if !n.Spec.Unschedulable {
			schedulable = append(schedulable, n)
		}
	}
	return eligibleNodes(p, schedulable, lastingTaint)
}

// holds is how many pods requesting req fit on the empty node: limited by resource
// only when only is set, by every resource otherwise.
func holds(n *corev1.Node, req corev1.ResourceList, only corev1.ResourceName) int {
	fit := -1
	for r, q := range req {
		if only != "" && r != only {
			continue
		}
		have := n.Status.Allocatable[r]
		k := int(amount(have, r) / amount(q, r))
		if fit < 0 || k < fit {
			fit = k
		}
	}
	return max(fit, 0)
}

// maxHolds is the most pods requesting req one node holds, counting resource r alone.
func maxHolds(nodes []*corev1.Node, req corev1.ResourceList, r corev1.ResourceName) int {
	most := 0
	for _, n := range nodes {
		most = max(most, holds(n, req, r))
	}
	return most
}

// roomFor is how many pods requesting req the nodes hold, counting resource r alone.
func roomFor(nodes []*corev1.Node, req corev1.ResourceList, r corev1.ResourceName) int {
	room := 0
	for _, n := range nodes {
		room += holds(n, req, r)
	}
	return room
}

// amount is q in the unit requests are compared in: millicores for CPU, units
// otherwise.
func amount(q resource.Quantity, r corev1.ResourceName) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func sumAllocatable(nodes []*corev1.Node, r corev1.ResourceName) resource.Quantity {
	var sum resource.Quantity
	for _, n := range nodes {
		sum.Add(n.Status.Allocatable[r])
	}
	return sum
}

// perNode says what each node has allocatable of r: "8 on each node" when they agree,
// else the first few by name.
func perNode(nodes []*corev1.Node, r corev1.ResourceName) string {
	const shown = 4
	first := nodes[0].Status.Allocatable[r]
	same := true
	var parts []string
	for i, n := range nodes {
		q := n.Status.Allocatable[r]
		same = same && q.Cmp(first) == 0
		if i < shown {
			parts = append(parts, fmt.Sprintf("%s on %s", q.String(), n.Name))
		}
	}
	if same {
		return first.String() + " on each node"
	}
	if len(nodes) > shown {
		parts = append(parts, fmt.Sprintf("%d more", len(nodes)-shown))
	}
	return strings.Join(parts, ", ")
}

// describeReplicas is "4 replicas (master: 1, worker: 3)", or "replica worker-0".
func describeReplicas(pods []*corev1.Pod) string {
	if len(pods) == 1 {
		return fmt.Sprintf("replica %s-%s", pods[0].Labels[LabelRole], pods[0].Labels[LabelReplicaIndex])
	}
	counts := map[string]int{}
	var roles []string
	for _, p := range pods {
		role := p.Labels[LabelRole]
		if counts[role] == 0 {
			roles = append(roles, role)
		}
		counts[role]++
	}
	slices.Sort(roles)
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = fmt.Sprintf("%s: %d", r, counts[r])
	}
	return fmt.Sprintf("%d replicas (%s)", len(pods), strings.Join(parts, ", "))
}

// describeRequests is "cpu 32, memory 256Gi, nvidia.com/gpu 8", without the pod slot.
func describeRequests(req corev1.ResourceList) string {
	var parts []string
	for _, r := range sortedResources(req) {
		if r == corev1.ResourcePods {
			continue
		}
		q := req[r]
		parts = append(parts, fmt.Sprintf("%s %s", r, q.String()))
	}
	if len(parts) == 0 {
		return "nothing but a pod slot"
	}
	return strings.Join(parts, ", ")
}

func sortedResources(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for r := range l {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// requestsKey is a canonical form of req, for grouping.
func requestsKey(req corev1.ResourceList) string {
	var b strings.Builder
	for _, r := range sortedResources(req) {
		q := req[r]
		fmt.Fprintf(&b, "%s=%s,", r, q.String())
	}
	return b.String()
}

func nodeNames(nodes []*corev1.Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ",")
}
