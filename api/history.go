package api

import (
	"time"

	"github.com/opendlc/opendlc/runs"
)

// Run records (package runs) outlive the Temporal namespace's retention of closed
// workflows: GET /v1/workspaces/{ws}/history answers a runs.Page, .../history/{kind}/{uid}
// one runs.Record; the lineage and usage routes answer these.

// Lineage is the answer of GET /v1/workspaces/{ws}/lineage: the runs that wrote or
// read under a checkpoint URI, or every run a schedule started and those runs'
// descendants (an experiment's trials, a pipeline run's steps), newest first.
type Lineage struct {
	Records []runs.Record `json:"records"`
	// Truncated says that there were more records than one answer holds (1000).
	Truncated bool `json:"truncated,omitempty"`
}

// Usage is the answer of GET /v1/usage: resource-hours per workspace, UTC day (and
// label value), from the attempts' running times cut to [From, To).
type Usage struct {
	From time.Time       `json:"from"`
	To   time.Time       `json:"to"`
	Rows []runs.UsageRow `json:"rows"`
}
