package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/activities"
)

// registerHeartbeatBudget adds --heartbeat-budget: the heartbeats a second the
// worker's job-long activities share (activities/heartbeat_pacer.go).
func registerHeartbeatBudget(fs *pflag.FlagSet, budget *float64) {
	fs.Float64Var(budget, "heartbeat-budget", activities.DefaultHeartbeatBudget,
		"heartbeats a second that the watches and log forwarders of all running jobs share; past that many, each heartbeats less often (docs/performance.md, Scale)")
}

// registerResourceInterval adds --resource-interval: how often the worker samples each
// running replica's CPU, memory and GPUs (activities/resources.go).
func registerResourceInterval(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "resource-interval", activities.DefaultResourceInterval,
		"how often to sample each running replica's CPU, memory and GPUs and publish the sample (opendlc.job.resources.v1; at least 1s; negative: never; docs/metrics.md)")
}
