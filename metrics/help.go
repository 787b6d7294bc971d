package metrics

import (
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The Temporal SDK creates its instruments, and the ones workflows record through
// workflow.GetMetricsHandler, without a description, and OpenTelemetry's Prometheus
// exporter turns a description into the family's HELP. helpView gives each of them one
// (promlint and Prometheus' own tooling flag a family without help), so every family
// this registry serves has help text. docs/metrics.md lists the same metrics.

// instrumentHelp is the help of the instruments recorded through the Temporal metrics
// handler, by instrument name (before the exporter adds _total or _seconds).
var instrumentHelp = map[string]string{
	// Recorded by OpenDLC's workflows (workflows/metrics.go).
	"opendlc_job_restarts":   "Job restarts after a fault, by failure class (recorded by the job workflow).",
	"opendlc_job_recovery":   "Time from a job's fault to the job running again, in seconds.",
	"opendlc_admission_wait": "Time a job waited for its workspace quota before it was admitted, in seconds.",

	// The Temporal Go SDK's client and worker metrics.
	"temporal_request":                         "Requests the Temporal client sent to the frontend, by operation.",
	"temporal_request_failure":                 "Requests to the Temporal frontend that failed, by operation and status code.",
	"temporal_request_latency":                 "Latency of requests to the Temporal frontend, in seconds.",
	"temporal_request_resource_exhausted":      "Requests the Temporal frontend refused as resource exhausted, by cause.",
	"temporal_long_request":                    "Long-poll requests the Temporal client sent, by operation.",
	"temporal_long_request_failure":            "Long-poll requests to the Temporal frontend that failed, by operation and status code.",
	"temporal_long_request_latency":            "Latency of long-poll requests to the Temporal frontend, in seconds.",
	"temporal_long_request_resource_exhausted": "Long-poll requests the Temporal frontend refused as resource exhausted, by cause.",

	"temporal_workflow_completed":        "Workflow executions that completed successfully.",
	"temporal_workflow_canceled":         "Workflow executions that ended cancelled.",
	"temporal_workflow_failed":           "Workflow executions that failed.",
	"temporal_workflow_continue_as_new":  "Workflow executions that continued as new.",
	"temporal_workflow_endtoend_latency": "Time from a workflow execution's start to its close, in seconds.",

	"temporal_workflow_task_replay_latency":            "Time spent replaying a workflow's history on a workflow task, in seconds.",
	"temporal_workflow_task_queue_poll_empty":          "Workflow task polls that returned no task.",
	"temporal_workflow_task_queue_poll_succeed":        "Workflow task polls that returned a task.",
	"temporal_workflow_task_schedule_to_start_latency": "Time a workflow task waited in its task queue before a worker started it, in seconds.",
	"temporal_workflow_task_execution_latency":         "Time a worker spent executing a workflow task, in seconds.",
	"temporal_workflow_task_execution_failed":          "Workflow tasks that failed, by failure reason.",
	"temporal_workflow_task_no_completion":             "Workflow tasks that ended without a completion sent to the server.",
	"temporal_workflow_active_thread_count":            "Workflow coroutines alive in the worker's cache.",

	"temporal_activity_poll_no_task":                   "Activity task polls that returned no task.",
	"temporal_activity_schedule_to_start_latency":      "Time an activity task waited in its task queue before a worker started it, in seconds.",
	"temporal_activity_execution_failed":               "Activity executions that failed.",
	"temporal_unregistered_activity_invocation":        "Activity tasks for an activity type the worker does not register.",
	"temporal_activity_execution_latency":              "Time a worker spent executing an activity, in seconds.",
	"temporal_activity_succeed_endtoend_latency":       "Time from an activity's scheduling to its successful completion, in seconds.",
	"temporal_activity_task_error":                     "Activity tasks the worker could not handle.",
	"temporal_local_activity_total":                    "Local activity executions started.",
	"temporal_local_activity_canceled":                 "Local activity executions cancelled (older name of local_activity_execution_cancelled).",
	"temporal_local_activity_execution_cancelled":      "Local activity executions cancelled.",
	"temporal_local_activity_failed":                   "Local activity executions failed (older name of local_activity_execution_failed).",
	"temporal_local_activity_execution_failed":         "Local activity executions that failed.",
	"temporal_local_activity_error":                    "Local activity tasks the worker could not handle.",
	"temporal_local_activity_execution_latency":        "Time a worker spent executing a local activity, in seconds.",
	"temporal_local_activity_succeed_endtoend_latency": "Time from a local activity's scheduling to its successful completion, in seconds.",

	"temporal_corrupted_signals":                    "Signals the worker dropped because their payload could not be decoded.",
	"temporal_worker_start":                         "Workers started in this process.",
	"temporal_worker_task_slots_available":          "Free task slots of a worker, by worker type.",
	"temporal_worker_task_slots_used":               "Task slots of a worker in use, by worker type.",
	"temporal_poller_start":                         "Task pollers started.",
	"temporal_num_pollers":                          "Task pollers running, by poller type.",
	"temporal_sticky_cache_hit":                     "Workflow tasks served from the worker's sticky cache.",
	"temporal_sticky_cache_miss":                    "Workflow tasks that missed the worker's sticky cache and replayed the history.",
	"temporal_sticky_cache_total_forced_eviction":   "Workflows evicted from the sticky cache to make room.",
	"temporal_sticky_cache_size":                    "Workflows held in the worker's sticky cache.",
	"temporal_nexus_poll_no_task":                   "Nexus task polls that returned no task.",
	"temporal_nexus_task_schedule_to_start_latency": "Time a Nexus task waited before a worker started it, in seconds.",
	"temporal_nexus_task_execution_failed":          "Nexus task executions that failed.",
	"temporal_nexus_task_execution_latency":         "Time a worker spent executing a Nexus task, in seconds.",
	"temporal_nexus_task_endtoend_latency":          "Time from a Nexus task's scheduling to its completion, in seconds.",
}

// helpFor returns the help of an instrument recorded through the Temporal metrics
// handler: its entry in instrumentHelp, else a generic line that names where it comes
// from (an SDK release may add metrics this table does not know yet).
func helpFor(name string) string {
	if h, ok := instrumentHelp[name]; ok {
		return h
	}
	if strings.HasPrefix(name, "temporal_") {
		return "Temporal Go SDK metric " + name + " (see the SDK's metrics reference)."
	}
	return "Metric " + name + " recorded through the Temporal SDK's metrics handler."
}

// helpView is the OpenTelemetry view that gives an instrument without a description
// its help; it keeps everything else of the stream.
func helpView(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Description != "" {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{
		Name: i.Name, Description: helpFor(i.Name), Unit: i.Unit,
	}, true
}
