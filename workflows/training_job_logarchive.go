package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
)

// archiveLogs copies the job's log records to its workspace's location once the gang
// is cleaned up (every line has been forwarded or the drain gave up), and records the
// archive's URI in the status. A failure is logged: the logs stay in the stream.
func (w *jobWorkflow) archiveLogs(ctx workflow.Context) {
	job := &w.in.Job
	res, err := archiveLogs(ctx, activities.ArchiveLogsInput{Workspace: job.Metadata.Workspace, Job: job.Metadata.Name, UID: w.uid})
	if err != nil {
		w.logger.Warn("could not archive the job's logs", "error", err)
		return
	}
	w.status.LogArchive = res.Dir
}
