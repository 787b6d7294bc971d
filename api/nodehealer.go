package api

import "time"

// NodeHealer is the node self-healing workflow's state, as `GET /v1/node-healer`
// answers it: its counters and its latest round's re-checks of quarantined nodes.
type NodeHealer struct {
	// Running says the workflow runs: a worker whose backend checks nodes started it.
	// When false (the local backend checks no nodes) every other field is empty.
	Running bool `json:"running"`
	// Interval between rounds and ProbeTimeout of each re-check pod, as Go durations
	// such as "5m0s"; empty when the workflow uses its defaults.
	Interval     string `json:"interval,omitempty"`
	ProbeTimeout string `json:"probeTimeout,omitempty"`
	// Rounds and Released count the rounds run and the nodes released, over every run.
	Rounds   int64 `json:"rounds"`
	Released int64 `json:"released"`
	// LastRound is when the latest round ended; LastNodes what it re-checked, and
	// LastError why it failed, if it did.
	LastRound *time.Time    `json:"lastRound,omitempty"`
	LastNodes []NodeRecheck `json:"lastNodes,omitempty"`
	LastError string        `json:"lastError,omitempty"`
}

// NodeRecheck is the self-healing workflow's re-check of one quarantined node.
type NodeRecheck struct {
	Node string `json:"node"`
	// Healthy says the node passed and was released.
	Healthy bool `json:"healthy"`
	// Reason is the verdict's reason, such as ChecksPassed; Message says more.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// CheckedAt is when the verdict was reached.
	CheckedAt time.Time `json:"checkedAt"`
	// Quarantined says the node is still quarantined after the re-check;
	// QuarantinedAt is when its quarantine began.
	Quarantined   bool       `json:"quarantined,omitempty"`
	QuarantinedAt *time.Time `json:"quarantinedAt,omitempty"`
	// Checks are the individual checks that ran, in order.
	Checks []NodeCheck `json:"checks,omitempty"`
}
