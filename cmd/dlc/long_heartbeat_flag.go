package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/workflows"
)

// registerLongHeartbeatTimeout adds --long-heartbeat-timeout: the heartbeat timeout of
// a running job's watch and log forwarder (workflows/paced_heartbeat.go).
func registerLongHeartbeatTimeout(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "long-heartbeat-timeout", workflows.DefaultLongHeartbeatTimeout,
		"how long a worker that died holds the watch and log forwarder of a running job before another worker takes them over (their heartbeat timeout; each heartbeats at least every third of it; docs/performance.md, Scale)")
}
