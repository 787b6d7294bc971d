package workers

import (
	"time"

	"go.temporal.io/sdk/worker"
)

// Task slots of a worker. The SDK's default of 1,000 concurrent activities is a limit
// on running jobs: each running job holds two activities for as long as it runs
// (WatchGang and ForwardLogs, which wait on the backend's shared informers and cost a
// parked goroutine each), so with the default a worker ran at most 500 jobs, and
// already well before that the short activities of the jobs being admitted and
// launched (ResolveWorkspace, LaunchGang, PublishEvents) queued for the few slots the
// long ones left free. The slots are sized for MaxRunningJobs jobs per worker plus
// room for the short activities.
const (
	// MaxRunningJobs is how many running jobs one worker's activity slots hold.
	MaxRunningJobs = 5000
	// longActivitiesPerJob are the activities a running job holds.
	longActivitiesPerJob = 2
	// shortActivitySlots are the slots left for the short activities when every
	// running job holds its long ones.
	shortActivitySlots = 1000
	// activitySlots is the worker's MaxConcurrentActivityExecutionSize.
	activitySlots = MaxRunningJobs*longActivitiesPerJob + shortActivitySlots
	// taskPollers is how many long polls the worker keeps open for each kind of task
	// (workflow, activity). The SDK's default of 2 lets tasks wait in the task queue
	// while many jobs are admitted at once: each poller takes one task per round trip
	// to the server, and a task no poller is waiting for is written to the task
	// queue's backlog and read back, two more writes on the server's database.
	taskPollers = 8
)

// workerOptions are the Temporal worker's options for cfg.
func workerOptions(cfg Config) worker.Options {
	return WithHandoff(worker.Options{
		// A cancelled activity learns of it from a heartbeat response, and the SDK sends
		// heartbeats at most once per throttle interval (by default 80% of the heartbeat
		// timeout). A short interval makes `dlc job stop` take about a second, not 16.
		MaxHeartbeatThrottleInterval:       time.Second,
		MaxConcurrentActivityExecutionSize: activitySlots,
		MaxConcurrentWorkflowTaskPollers:   taskPollers,
		MaxConcurrentActivityTaskPollers:   taskPollers,
		// A stopping worker cancels its running activities and reports each as
		// retryable, so that another worker takes it at once (WithHandoff).
		Interceptors: cfg.Interceptors,
	})
}
