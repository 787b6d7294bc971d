package activities

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/opendlc/opendlc/backend"
)

// CheckNodes runs the pre-flight health check of an attempt's candidate nodes,
// heartbeating while it waits. With a backend that cannot check nodes (local), it
// reports the local host healthy.
func (a *JobActivities) CheckNodes(ctx context.Context, in backend.CheckNodesInput) (backend.CheckNodesResult, error) {
	defer keepAlive(ctx)()
	if in.Timeout <= 0 {
		in.Timeout = in.Job.Spec.HealthCheck.Timeout.D()
	}
	if in.Timeout <= 0 {
		in.Timeout = backend.DefaultHealthCheckTimeout
	}
	nc, ok := a.Backend.(backend.NodeChecker)
	if !ok {
		return localHealth(in.Exclude), nil
	}
	res, err := nc.CheckNodes(ctx, in)
	if err != nil {
		return backend.CheckNodesResult{}, backendError(err, "check nodes of "+in.Ref.ID())
	}
	return res, nil
}

// localHealth is the verdict of a backend that runs everything on this host.
func localHealth(exclude []string) backend.CheckNodesResult {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if slices.Contains(exclude, host) {
		return backend.CheckNodesResult{Nodes: []backend.NodeHealth{}}
	}
	return backend.CheckNodesResult{Nodes: []backend.NodeHealth{{
		Node: host, Healthy: true, Reason: backend.ReasonNotChecked,
		Message:   "the local backend runs every replica on this host and does not check it",
		CheckedAt: time.Now().UTC(),
	}}}
}

// RecheckQuarantinedInput configures one round of the node self-healing loop.
type RecheckQuarantinedInput struct {
	// ProbeTimeout bounds each check pod; zero means backend.DefaultProbeTimeout.
	ProbeTimeout time.Duration `json:"probeTimeout,omitempty"`
}

// RecheckQuarantinedResult lists the nodes re-checked and those released.
type RecheckQuarantinedResult struct {
	// Nodes holds one entry per node re-checked, sorted by name: Healthy ones were
	// released, the others stay quarantined with a longer backoff.
	Nodes []backend.NodeHealth `json:"nodes"`
	// Released names the nodes released, sorted.
	Released []string `json:"released,omitempty"`
}

// RecheckQuarantined re-checks the quarantined nodes whose backoff has passed and
// releases the healthy ones, heartbeating while it waits. A backend that cannot check
// nodes has none quarantined.
func (a *JobActivities) RecheckQuarantined(ctx context.Context, in RecheckQuarantinedInput) (RecheckQuarantinedResult, error) {
	defer keepAlive(ctx)()
	nc, ok := a.Backend.(backend.NodeChecker)
	if !ok {
		return RecheckQuarantinedResult{Nodes: []backend.NodeHealth{}}, nil
	}
	if in.ProbeTimeout <= 0 {
		in.ProbeTimeout = backend.DefaultProbeTimeout
	}
	nodes, err := nc.RecheckQuarantined(ctx, in.ProbeTimeout)
	if err != nil {
		return RecheckQuarantinedResult{}, fmt.Errorf("recheck quarantined nodes: %w", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	res := RecheckQuarantinedResult{Nodes: nodes}
	if res.Nodes == nil {
		res.Nodes = []backend.NodeHealth{}
	}
	for _, n := range nodes {
		if n.Healthy {
			res.Released = append(res.Released, n.Node)
		}
	}
	return res, nil
}
