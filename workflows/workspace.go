package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// resolveWorkspace reads the job's workspace configuration from the registry, once,
// when the job starts: the namespace its gangs run in (set on ref) and its pod
// defaults. The result is in the workflow's history, so every attempt, stop and cleanup
// of the job uses the same namespace even if the workspace is edited while the job
// runs; an edit applies to jobs started after it. It returns false, with the outcome,
// when the registry could not be read.
func (w *jobWorkflow) resolveWorkspace(ctx workflow.Context, ref *backend.GangRef) (jobOutcome, bool) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         backoff(10),
	})
	cfg, err := call[activities.WorkspaceConfig](actx, ActivityResolveWorkspace, ref.Workspace)
	if err != nil {
		return jobOutcome{schemas.JobFailed, ReasonWorkspaceUnreadable,
			"could not read workspace " + ref.Workspace + " from the registry: " + rootMessage(err)}, false
	}
	ref.Namespace = cfg.Namespace
	w.podDefaults = cfg.PodDefaults
	return jobOutcome{}, true
}
