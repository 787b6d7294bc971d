package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schemas"
)

// Metrics the job workflow records through workflow.GetMetricsHandler, which records
// nothing while a workflow replays. The Temporal SDK's metrics handler exports them
// (package metrics): a counter gets the suffix _total, a timer is a histogram in
// seconds with the suffix _seconds, and the SDK adds the labels namespace, task_queue
// and workflow_type.
const (
	// MetricJobRestarts counts restarts by failure_class (schemas.FailureClass).
	MetricJobRestarts = "opendlc_job_restarts"
	// MetricJobRecovery is the time from a fault to the job running again.
	MetricJobRecovery = "opendlc_job_recovery"
	// MetricAdmissionWait is the time a job waited for its workspace quota, by
	// workspace.
	MetricAdmissionWait = "opendlc_admission_wait"
)

// recordPhaseMetrics records what entering phase means for the metrics: a restart, by
// the failure's class, or, on Running after a restart, the time since the fault.
func (w *jobWorkflow) recordPhaseMetrics(ctx workflow.Context, phase schemas.JobPhase, now time.Time) {
	switch phase {
	case schemas.JobRestarting:
		class := w.currentAttempt().Class
		if class == "" {
			class = schemas.FailureUnclassified
		}
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"failure_class": string(class)}).
			Counter(MetricJobRestarts).Inc(1)
	case schemas.JobRunning:
		n := len(w.status.Attempts)
		if n < 2 {
			return
		}
		prev := w.status.Attempts[n-2]
		if prev.Outcome != schemas.JobRestarting || prev.FaultTime == nil || now.Before(*prev.FaultTime) {
			return
		}
		workflow.GetMetricsHandler(ctx).Timer(MetricJobRecovery).Record(now.Sub(*prev.FaultTime))
	}
}

// recordAdmissionWait records how long the job waited for its workspace quota.
func (w *jobWorkflow) recordAdmissionWait(ctx workflow.Context, since time.Time) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"workspace": w.in.Job.Metadata.Workspace}).
		Timer(MetricAdmissionWait).Record(workflow.Now(ctx).Sub(since))
}
