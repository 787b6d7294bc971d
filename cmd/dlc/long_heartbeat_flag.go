package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/workflows"
)

// registerLongHeartbeatTimeout adds --long-heartbeat-timeout: the heartbeat timeout of
// a running job's watch and log forwarder (workflows/paced_heartbeat.go).
func registerLongHeartbeatTimeout(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "long-heartbeat-timeout", workflows.DefaultLongHeartbeatTimeout,
		"how long a worker that died holds the watch and log forwarder of a running job before another worker takes them over (their heartbeat timeout; each heartbeats at least every third of it; docs/performance.md, Scale)")
}

// checkLongHeartbeatTimeout refuses a timeout below workflows.MinLongHeartbeatTimeout.
func checkLongHeartbeatTimeout(d time.Duration) error {
	if d < workflows.MinLongHeartbeatTimeout {
		return fmt.Errorf("--long-heartbeat-timeout: %s is below the minimum %s", d, workflows.MinLongHeartbeatTimeout)
	}
	return nil
}
