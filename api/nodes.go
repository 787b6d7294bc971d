package api

import "time"

// Node is a node's latest health verdict and quarantine state, as `GET /v1/nodes`
// answers it. The verdicts are the node-health events (a job's pre-flight check that
// quarantined the node, the self-healing workflow's re-checks and releases, an
// administrator's release), merged with the self-healing workflow's latest round.
type Node struct {
	Name string `json:"name"`
	// Status is the latest verdict: Healthy, Unhealthy or Quarantined.
	Status string `json:"status"`
	// Quarantined says the node is quarantined after that verdict (tainted
	// opendlc.io/quarantined=true:NoSchedule: no new replica lands there).
	Quarantined bool `json:"quarantined"`
	// CheckedAt is when the latest verdict was reached.
	CheckedAt time.Time `json:"checkedAt"`
	// Job is the job whose pre-flight check reached the verdict; empty for the
	// self-healing workflow's and an administrator's.
	Job string `json:"job,omitempty"`
	// Checks are the checks behind the verdict.
	Checks []NodeCheck `json:"checks,omitempty"`
	// Verdicts counts the node's verdicts in the window read (7 days).
	Verdicts int `json:"verdicts"`
}

// NodeList answers `GET /v1/nodes`: every node with a health verdict, by name.
type NodeList struct {
	Items []Node `json:"items"`
}

// NodeRelease asks `POST /v1/nodes/{name}/release` to release a node from quarantine.
type NodeRelease struct {
	// Reason is recorded in the release's node-health event; optional.
	Reason string `json:"reason,omitempty"`
}

// NodeCheck is one check behind a node's verdict (a node-health event's check).
type NodeCheck struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}
