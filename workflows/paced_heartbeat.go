package workflows

import (
	"fmt"
	"sync/atomic"
	"time"
)

// The heartbeat timeout of the job-long activities (WatchGang, ForwardLogs) is a
// setting of the worker process (`dlc worker --long-heartbeat-timeout`): it is how long
// a worker that died holds a running job's watch and log forwarder before Temporal
// retries them on another worker. It is an attribute of the ScheduleActivityTask
// command, which Temporal does not compare on replay, so workers with different
// settings replay each other's histories.

// MinLongHeartbeatTimeout is the shortest heartbeat timeout the job-long activities
// take: the heartbeat pacer sends one at least every third of it, and never more often
// than once a second (activities/heartbeat_pacer.go).
const MinLongHeartbeatTimeout = 3 * time.Second

// longHeartbeatTimeout is the process's setting in nanoseconds; 0: pacedHeartbeatTimeout.
var longHeartbeatTimeout atomic.Int64

// SetLongHeartbeatTimeout sets the heartbeat timeout of the job-long activities that
// the workflows of this process schedule from now on; 0 restores the default
// (DefaultLongHeartbeatTimeout). It refuses a timeout below MinLongHeartbeatTimeout.
func SetLongHeartbeatTimeout(d time.Duration) error {
	if d != 0 && d < MinLongHeartbeatTimeout {
		return fmt.Errorf("long-activity heartbeat timeout %s is below the minimum %s", d, MinLongHeartbeatTimeout)
	}
	longHeartbeatTimeout.Store(int64(d))
	return nil
}

// DefaultLongHeartbeatTimeout is the heartbeat timeout of the job-long activities
// unless the worker sets another (SetLongHeartbeatTimeout).
const DefaultLongHeartbeatTimeout = pacedHeartbeatTimeout

// longHeartbeat is the heartbeat timeout of the job-long activities in this process.
func longHeartbeat() time.Duration {
	if d := time.Duration(longHeartbeatTimeout.Load()); d > 0 {
		return d
	}
	return pacedHeartbeatTimeout
}
