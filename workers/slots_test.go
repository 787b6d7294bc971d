package workers

import (
	"testing"
	"time"
)

// TestWorkerSlotsHoldManyRunningJobs checks that a worker's activity slots hold the
// long activities of MaxRunningJobs running jobs and still leave room for the short
// ones; the SDK's default (1,000) held 500 jobs and nothing else.
func TestWorkerSlotsHoldManyRunningJobs(t *testing.T) {
	o := workerOptions(Config{})
	long := MaxRunningJobs * longActivitiesPerJob
	if o.MaxConcurrentActivityExecutionSize < long+shortActivitySlots {
		t.Fatalf("MaxConcurrentActivityExecutionSize %d: want at least %d (%d jobs x %d long activities) + %d",
			o.MaxConcurrentActivityExecutionSize, long+shortActivitySlots, MaxRunningJobs, longActivitiesPerJob, shortActivitySlots)
	}
	if MaxRunningJobs < 1000 {
		t.Fatalf("MaxRunningJobs %d: want a worker sized for at least 1,000 running jobs", MaxRunningJobs)
	}
	if o.MaxConcurrentWorkflowTaskPollers < 4 || o.MaxConcurrentActivityTaskPollers < 4 {
		t.Fatalf("pollers %d (workflow tasks), %d (activity tasks): want more than the SDK's 2",
			o.MaxConcurrentWorkflowTaskPollers, o.MaxConcurrentActivityTaskPollers)
	}
	if o.MaxHeartbeatThrottleInterval != time.Second {
		t.Fatalf("MaxHeartbeatThrottleInterval %s: want 1s (dlc stop is seen within a second)", o.MaxHeartbeatThrottleInterval)
	}
}
