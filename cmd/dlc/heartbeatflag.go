package main

import (
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/activities"
)

// registerHeartbeatBudget adds --heartbeat-budget: the heartbeats a second the
// worker's job-long activities share (activities/heartbeat_pacer.go).
func registerHeartbeatBudget(fs *pflag.FlagSet, budget *float64) {
	fs.Float64Var(budget, "heartbeat-budget", activities.DefaultHeartbeatBudget,
		"heartbeats a second that the watches and log forwarders of all running jobs share; past that many, each heartbeats less often (docs/performance.md, Scale)")
}
