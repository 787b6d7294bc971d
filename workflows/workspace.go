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
//
// It is a local activity (changeWorkspaceLocalActivity): a read of the registry that
// takes milliseconds, run within the job's first workflow task instead of costing an
// activity task and a workflow task more before the gang can launch.
func (w *jobWorkflow) resolveWorkspace(ctx workflow.Context, ref *backend.GangRef) (jobOutcome, bool) {
	var cfg activities.WorkspaceConfig
	var err error
	if workflow.GetVersion(ctx, changeWorkspaceLocalActivity, workflow.DefaultVersion, 1) == 1 {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout:    30 * time.Second,
			ScheduleToCloseTimeout: 5 * time.Minute,
			RetryPolicy:            backoff(10),
		})
		err = workflow.ExecuteLocalActivity(lctx, ActivityResolveWorkspace, ref.Workspace).Get(ctx, &cfg)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			RetryPolicy:         backoff(10),
		})
		cfg, err = call[activities.WorkspaceConfig](actx, ActivityResolveWorkspace, ref.Workspace)
	}
	if err != nil {
		return jobOutcome{schemas.JobFailed, ReasonWorkspaceUnreadable,
			"could not read workspace " + ref.Workspace + " from the registry: " + rootMessage(err)}, false
	}
	ref.Namespace = cfg.Namespace
	w.podDefaults = cfg.PodDefaults
	return jobOutcome{}, true
}
