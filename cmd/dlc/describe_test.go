package main

import (
	"io"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// describe shows the recovery story: restarts, excluded nodes, each attempt's class,
// action and checkpoint, the health check, and the last metrics.
func TestDescribeShowsRecovery(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	j := &api.Job{UID: "u", Status: schemas.JobStatus{
		Phase: schemas.JobSucceeded, Attempt: 1, Restarts: 1, ExcludedNodes: []string{"node-b"},
		Metrics: map[string]float64{"loss": 0.25, "accuracy": 0.9},
		Attempts: []schemas.AttemptRecord{
			{Attempt: 0, StartTime: t0, Outcome: schemas.JobRestarting, Class: schemas.FailureNodeLost, Action: "Retry", Node: "node-b"},
			{Attempt: 1, StartTime: t0.Add(time.Minute), Outcome: schemas.JobSucceeded, ResumedFrom: "s3://ckpt/j/000000000100"},
		},
		Health: []schemas.NodeHealth{{Node: "node-a", Healthy: true, Reason: "ChecksPassed"}},
	}}
	printed(t, func(w io.Writer) error { describeJob(w, j); return nil },
		"Restarts:    1 (preemptions 0)", "Excluded:    node-b", "Metrics:     accuracy=0.9 loss=0.25",
		"NodeLost", "s3://ckpt/j/000000000100", "node-a", "ChecksPassed")
}
