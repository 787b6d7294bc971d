package backend

import (
	"context"
	"sort"
	"time"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// DefaultHealthCheckTimeout bounds a pre-flight check when neither the caller nor the
// job's spec.healthCheck.timeout says otherwise.
const DefaultHealthCheckTimeout = 5 * time.Minute

// DefaultProbeTimeout bounds a re-check's pods when RecheckQuarantinedInput does not.
const DefaultProbeTimeout = 2 * time.Minute

// Reasons a node is reported healthy or unhealthy (NodeHealth.Reason).
const (
	// ReasonChecksPassed: every check passed.
	ReasonChecksPassed = "ChecksPassed"
	// ReasonNotChecked: the backend cannot check nodes (local); the host counts as
	// healthy.
	ReasonNotChecked = "NotChecked"
	// ReasonNodeNotReady: the node's Ready condition is not True.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonCordoned: the node is unschedulable (cordoned by an administrator). It is
	// reported unhealthy but never quarantined: the administrator's decision stands.
	ReasonCordoned = "Cordoned"
	// ReasonGPUsLost: the node allocates fewer GPUs than it has (a GPU fell off the
	// bus, or the device plugin reports it unhealthy).
	ReasonGPUsLost = "GPUsLost"
	// ReasonProbeFailed: the check pod ran on the node and failed.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonProbeTimeout: the check pod did not finish within the timeout.
	ReasonProbeTimeout = "ProbeTimeout"
	// ReasonQuarantined: the node was already quarantined by an earlier check; it is
	// not probed again until its backoff passes (see NodeChecker.RecheckQuarantined).
	ReasonQuarantined = "Quarantined"
)

// Names of the checks in NodeHealth.Checks (and in node-health events).
const (
	CheckReady       = "Ready"
	CheckSchedulable = "Schedulable"
	CheckGPUs        = "GPUs"
	CheckProbe       = "Probe"
)

// NodeHealth is the outcome of checking one node.
type NodeHealth struct {
	Node    string `json:"node"`
	Healthy bool   `json:"healthy"`
	// Reason is one of the Reason* constants; Message says more, for people.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// CheckedAt is when the verdict was reached.
	CheckedAt time.Time `json:"checkedAt"`
	// Quarantined says the node is quarantined after this check (tainted
	// opendlc.io/quarantined=true:NoSchedule), whether by this check or an earlier
	// one; QuarantinedAt is when its quarantine began (second precision), which
	// identifies the quarantine across retries.
	Quarantined   bool       `json:"quarantined,omitempty"`
	QuarantinedAt *time.Time `json:"quarantinedAt,omitempty"`
	// Checks lists the individual checks that ran, in order.
	Checks []events.HealthCheck `json:"checks,omitempty"`
}

// CheckNodesInput asks for a pre-flight check of the nodes an attempt may run on.
type CheckNodesInput struct {
	// Ref is the attempt the check is for: it names the check pods, so a retried
	// activity finds the pods its first run created.
	Ref GangRef `json:"ref"`
	// Job decides the candidate nodes: its pool (the backend's node selector and
	// tolerations for it), its roles' node selectors and tolerations, and whether it
	// needs GPUs.
	Job schemas.TrainingJob `json:"job"`
	// Pool, when set, overrides spec.resources.pool (as GangParams.Pool does).
	Pool schemas.Pool `json:"pool,omitempty"`
	// Exclude are nodes the workflow already keeps the job off; they are not checked
	// and not reported.
	Exclude []string `json:"exclude,omitempty"`
	// Timeout bounds the check pods; zero means spec.healthCheck.timeout, or
	// DefaultHealthCheckTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// CheckNodesResult is the verdict on every candidate node.
type CheckNodesResult struct {
	// Nodes holds every candidate, sorted by name, nodes quarantined earlier included
	// (unhealthy, reason Quarantined). Keep the job off every node that is not Healthy.
	Nodes []NodeHealth `json:"nodes"`
	// Quarantined names the nodes this check quarantined, sorted. A retried check
	// reports the nodes its first run quarantined again.
	Quarantined []string `json:"quarantined,omitempty"`
}

// Unhealthy returns the names of the nodes that are not healthy, sorted.
func (r CheckNodesResult) Unhealthy() []string {
	var out []string
	for _, n := range r.Nodes {
		if !n.Healthy {
			out = append(out, n.Node)
		}
	}
	sort.Strings(out)
	return out
}

// NodeChecker is implemented by backends that can check the health of the nodes they
// place replicas on, and quarantine the bad ones (the kubernetes backend). Backends
// that cannot (local) simply do not implement it.
type NodeChecker interface {
	// CheckNodes checks every candidate node of the job and quarantines those found
	// unhealthy. It waits at most in.Timeout for the check pods.
	CheckNodes(ctx context.Context, in CheckNodesInput) (CheckNodesResult, error)
	// RecheckQuarantined re-checks the quarantined nodes whose backoff has passed,
	// each check pod bounded by probeTimeout, releases those found healthy and
	// lengthens the backoff of the others. It returns one entry per node re-checked:
	// Healthy ones were released.
	RecheckQuarantined(ctx context.Context, probeTimeout time.Duration) ([]NodeHealth, error)
}
