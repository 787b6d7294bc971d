package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/activities"
)

// registerHeartbeatBudget adds --heartbeat-budget: the heartbeats a second the
// worker's job-long activities share (activities/heartbeat_pacer.go).
func registerHeartbeatBudget(cmd *cobra.Command, budget *float64) {
	cmd.Flags().Float64Var(budget, "heartbeat-budget", activities.DefaultHeartbeatBudget,
		"heartbeats a second that the watches and log forwarders of all running jobs share; past that many, each heartbeats less often (docs/performance.md, Scale)")
}

// checkHeartbeatBudget refuses a budget that is not positive.
func checkHeartbeatBudget(budget float64) error {
	if budget <= 0 {
		return fmt.Errorf("--heartbeat-budget: %g is not positive; want heartbeats per second, e.g. %d", budget, activities.DefaultHeartbeatBudget)
	}
	return nil
}
