package kubestack

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names on the fake nodes.
const (
	// AnnotationKwokNode marks the nodes kwok manages (value "fake"); nodes
	// without it are left alone.
	AnnotationKwokNode = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	// LabelGPU ("true") is on every fake node, for node selectors.
	LabelGPU = "opendlc.io/gpu"
	// ResourceGPU is the extended resource the fake nodes advertise.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// NodePrefix starts every fake node's name: kwok-node-0, kwok-node-1...
	NodePrefix = "kwok-node-"
)

// node returns the fake node called name.
func (c *Cluster) node(name string) (*corev1.Node, error) {
	cpu, err := resource.ParseQuantity(c.opts.NodeCPU)
	if err != nil {
		return nil, fmt.Errorf("kubestack: Options.NodeCPU: %w", err)
	}
	mem, err := resource.ParseQuantity(c.opts.NodeMemory)
	if err != nil {
		return nil, fmt.Errorf("kubestack: Options.NodeMemory: %w", err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(int64(c.opts.GPUsPerNode), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				AnnotationKwokNode:             kwokNodeValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"node-role.kubernetes.io/agent": "",
				"type":                          "kwok",
				LabelNodeKind:                   "kwok",
				LabelGPU:                        "true",
			},
		},
		// No kwok taint: workloads land here as they would on a real GPU node.
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}, nil
}

// createNodes creates the fake nodes; those already there (a restart on
// the same Dir) are kept.
func (c *Cluster) createNodes(ctx context.Context) error {
	c.Nodes = nil
	for i := range c.opts.Nodes {
		n, err := c.node(NodePrefix + strconv.Itoa(i))
		if err != nil {
			return err
		}
		_, err = c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubestack: create node %s: %w", n.Name, err)
		}
		c.Nodes = append(c.Nodes, n.Name)
	}
	return nil
}

// waitNodesReady waits until kwok reports every node Ready and the
// controller manager has lifted the not-ready taint that admission puts on
// new nodes, so pods can be scheduled.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	return c.pollUntil(ctx, "nodes Ready and untainted", func(ctx context.Context) error {
		for _, name := range c.Nodes {
			if err := c.nodeUsable(ctx, name); err != nil {
				return err
			}
		}
		return nil
	})
}

// nodeUsable returns nil when node name is Ready and carries neither the not-ready nor
// the unreachable taint, so pods can be scheduled on it, and has the InternalIP address
// the API server reaches its kubelet endpoint by; else what is missing.
func (c *Cluster) nodeUsable(ctx context.Context, name string) error {
	n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !NodeReady(n) {
		return fmt.Errorf("node %s not Ready", name)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return fmt.Errorf("node %s still tainted %s", name, t.Key)
		}
	}
	// The API server reaches the node's kubelet endpoint (kwok's, for pods/log)
	// through its InternalIP address.
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return nil
		}
	}
	return fmt.Errorf("node %s has no InternalIP address", name)
}

// waitDefaultServiceAccount waits for the controller manager to create the
// default service account, without which pods in "default" are refused.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return c.pollUntil(ctx, "default service account", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pollUntil calls check every 100ms until it succeeds or ctx ends, and
// fails early if a component exits. what names the condition in errors.
func (c *Cluster) pollUntil(ctx context.Context, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last error
	for {
		c.mu.Lock()
		procs := c.procs
		c.mu.Unlock()
		for _, p := range procs {
			if ok, err := p.Exited(); ok {
				return fmt.Errorf("kubestack: waiting for %s: %w", what, err)
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubestack: waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
		case <-ticker.C:
		}
	}
}
