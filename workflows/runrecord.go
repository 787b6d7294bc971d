package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/runs"
)

// Run records: when a job, experiment or pipeline run ends, its workflow writes its
// record (package runs) to the run record database, which keeps it after Temporal's
// retention has dropped the closed workflow.
const (
	// ActivityRecordRun writes a finished run's record (activities.RecordRunInput →
	// activities.RecordRunResult).
	ActivityRecordRun = "RecordRun"
)

// recordRunTimeout bounds how long a workflow keeps trying to write its record while
// the database cannot be reached; past it the record is given up, with an error in the
// worker's log, and the workflow closes.
const recordRunTimeout = 24 * time.Hour

// recordRun writes the run's record, once (the activity's write is idempotent on the
// run's uid), behind the run-records change: histories recorded before it write none.
// A record is never worth failing the run for: an error is logged.
func recordRun(ctx workflow.Context, logger interface{ Error(string, ...any) }, in activities.RecordRunInput) {
	if workflow.GetVersion(ctx, changeRunRecords, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if owner, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(OwnerKey); ok {
		in.Owner = owner
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: recordRunTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, NonRetryableErrorTypes: []string{activities.ErrTypeInvalidSpec}},
	}
	if _, err := call[activities.RecordRunResult](workflow.WithActivityOptions(ctx, opts), ActivityRecordRun, in); err != nil {
		logger.Error("could not write the run record", "uid", in.UID, "error", err)
	}
}

// recordJob writes a finished job's record.
func (w *jobWorkflow) recordJob(ctx workflow.Context) {
	d := jobDemand(&w.in.Job)
	st := w.status
	recordRun(ctx, w.logger, activities.RecordRunInput{UID: w.uid, Parent: w.in.Parent, Job: &w.in.Job, JobStatus: &st,
		Demand: runs.Demand{GPU: d.GPU, CPU: float64(d.MilliCPU) / 1000, MemoryBytes: d.MemoryBytes}})
}
