package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"

	"github.com/opendlc/opendlc/backend"
)

// Resource use of a replica's pod (backend.ResourceSampler), with WithNodeStats: the
// kubelet's statistics summary of the pod's node (GET
// /api/v1/nodes/NODE/proxy/stats/summary through the API server, which needs get on
// nodes/proxy: deploy/rbac-node-stats.yaml), the replica container's cumulative CPU
// time and working set; the memory limit is the container's. GPUs come from the node's
// DCGM exporter with WithDCGMExporter (dcgm.go). Without WithNodeStats, the backend
// answers errors.ErrUnsupported and the forwarder samples nothing.

var _ backend.ResourceSampler = (*Backend)(nil)

// WithNodeStats reads replicas' resource use from the kubelets' statistics summaries.
// The worker then needs get on nodes/proxy, which also lets it reach every kubelet's
// other endpoints through the API server: off by default.
func WithNodeStats(on bool) Option {
	return func(b *Backend) error {
		b.nodeStats = on
		return nil
	}
}

// nodeStatsMaxAge is how long one node's summary serves the samples of its pods.
const nodeStatsMaxAge = time.Second

// statsSummary is the part of the kubelet's /stats/summary (the stats/v1alpha1 API)
// that a sample reads.
type statsSummary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Containers []struct {
			Name string `json:"name"`
			CPU  *struct {
				Time                 time.Time `json:"time"`
				UsageCoreNanoSeconds *uint64   `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
			Memory *struct {
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"containers"`
	} `json:"pods"`
}

// freshCache keeps, per node, what was last read of it (the kubelet's summary, the DCGM
// exporter's GPUs, dcgm.go) for nodeStatsMaxAge, so the samples of a node's pods share
// one read.
type freshCache[T any] struct {
	mu      sync.Mutex
	entries map[string]freshEntry[T]
	flight  singleflight.Group
}

type freshEntry[T any] struct {
	v  T
	at time.Time
}

// get answers key's value if it was fetched less than nodeStatsMaxAge ago, else
// fetches it. The fetch runs outside the lock, so one node's slow kubelet or exporter
// does not hold up the samples of other nodes' pods; callers that miss on one key at
// once share one fetch.
func (c *freshCache[T]) get(key string, fetch func() (T, error)) (T, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < nodeStatsMaxAge {
		return e.v, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		v, err := fetch()
		if err != nil {
			return v, err
		}
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[string]freshEntry[T]{}
		}
		c.entries[key] = freshEntry[T]{v: v, at: time.Now()}
		c.mu.Unlock()
		return v, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// SampleResources reads the replica container's use from its node's kubelet.
func (b *Backend) SampleResources(ctx context.Context, ref backend.GangRef, replica string) (backend.ResourceSample, error) {
	if !b.nodeStats {
		return backend.ResourceSample{}, fmt.Errorf("kube: node statistics are off (WithNodeStats): %w", errors.ErrUnsupported)
	}
	b.cache.start()
	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return backend.ResourceSample{}, fmt.Errorf("%w: %s (namespace %s is not the worker's)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	pod, err := b.cache.pod(ctx, ns, replica)
	if err != nil {
		return backend.ResourceSample{}, err
	}
	if pod == nil || pod.Labels[LabelGang] != gangValue(ref) || pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return backend.ResourceSample{}, fmt.Errorf("%w: %s", backend.ErrNotRunning, replica)
	}
	sum, err := b.nodeSummary(ctx, pod.Spec.NodeName)
	if err != nil {
		return backend.ResourceSample{}, err
	}
	s := backend.ResourceSample{Node: pod.Spec.NodeName}
	for _, c := range pod.Spec.Containers {
		if c.Name == ContainerName {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				s.MemoryLimitBytes = q.Value()
			}
		}
	}
	var ok bool
	if s.Time, s.CPUSeconds, s.MemoryBytes, ok = sum.container(pod.Namespace, pod.Name, ContainerName); !ok {
		// A container the kubelet has not measured yet (it just started), or no longer
		// (it has ended, and the pod's end has not reached the informer yet).
		return backend.ResourceSample{}, fmt.Errorf("%w: the kubelet of %s has no statistics of a running %s", backend.ErrNotRunning, pod.Spec.NodeName, replica)
	}
	// The GPUs are best effort: an exporter that cannot be read leaves them out.
	if s.GPUs, err = b.podGPUs(ctx, pod.Status.HostIP, pod.Namespace, pod.Name); err != nil {
		b.logger.Warn("kube: GPUs not sampled", "replica", replica, "error", err)
	}
	return s, nil
}

// container reads a container's cumulative CPU time and working set from the summary,
// and when the kubelet read them (now when it does not say). A container without a
// working set is not running: a live container's cgroup always holds some memory, while
// one that has ended can still be listed, its CPU time frozen and its working set 0 (a
// sample of it would report an idle, empty container the job never had).
func (sum *statsSummary) container(namespace, pod, name string) (at time.Time, cpuSeconds float64, memory int64, ok bool) {
	for _, p := range sum.Pods {
		if p.PodRef.Name != pod || p.PodRef.Namespace != namespace {
			continue
		}
		for _, c := range p.Containers {
			if c.Name != name || c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil ||
				c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 {
				continue
			}
			at = c.CPU.Time
			if at.IsZero() {
				at = time.Now()
			}
			return at, float64(*c.CPU.UsageCoreNanoSeconds) / 1e9, int64(*c.Memory.WorkingSetBytes), true
		}
	}
	return time.Time{}, 0, 0, false
}

// nodeSummary is the kubelet's summary of node, at most nodeStatsMaxAge old.
func (b *Backend) nodeSummary(ctx context.Context, node string) (*statsSummary, error) {
	return b.summaries.get(node, func() (*statsSummary, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		raw, err := b.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("kube: the statistics of node %s: %w", node, err)
		}
		var s statsSummary
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("kube: the statistics of node %s: %w", node, err)
		}
		return &s, nil
	})
}
