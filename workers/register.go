// Package workers wires OpenDLC's workflows and activities into Temporal workers.
package workers

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/workflows"
)

// WorkflowRegistry is what a worker.Worker, a replayer and the test environment offer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// ActivityRegistry is what a worker.Worker and the test environment offer.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// RegisterWorkflows registers every workflow under its wire name: each kind's
// (workerKinds, kinds.go), the workspace quota's, node health's and the trigger gate's.
func RegisterWorkflows(r WorkflowRegistry) {
	for _, k := range workerKinds {
		if k.workflow != nil {
			r.RegisterWorkflowWithOptions(k.workflow, workflow.RegisterOptions{Name: k.name})
		}
	}
	r.RegisterWorkflowWithOptions(workflows.QuotaWorkflow, workflow.RegisterOptions{Name: workflows.QuotaWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.NodeHealthWorkflow, workflow.RegisterOptions{Name: workflows.NodeHealthWorkflowName})
	// The trigger gates; their activities are the trigger dispatchers' (package triggers).
	r.RegisterWorkflowWithOptions(workflows.TriggerGateWorkflow, workflow.RegisterOptions{Name: workflows.TriggerGateWorkflowName})
}

// RegisterActivities registers the job activities under their wire names.
func RegisterActivities(r ActivityRegistry, a *activities.JobActivities) {
	for name, fn := range map[string]any{
		workflows.ActivityPublishEvents:      a.PublishEvents,
		workflows.ActivityLaunchGang:         a.LaunchGang,
		workflows.ActivityWatchGang:          a.WatchGang,
		workflows.ActivityStopGang:           a.StopGang,
		workflows.ActivityCleanupGang:        a.CleanupGang,
		workflows.ActivityForwardLogs:        a.ForwardLogs,
		workflows.ActivityLogProgress:        a.LogProgress,
		workflows.ActivityLatestCheckpoint:   a.LatestCheckpoint,
		workflows.ActivityPruneCheckpoints:   a.PruneCheckpoints,
		workflows.ActivityCheckNodes:         a.CheckNodes,
		workflows.ActivityRecheckQuarantined: a.RecheckQuarantined,
		workflows.ActivityResolveWorkspace:   a.ResolveWorkspace,
		workflows.ActivityReleaseNode:        a.ReleaseNode,
		workflows.ActivityScaleGang:          a.ScaleGang,
		workflows.ActivityReplaceReplica:     a.ReplaceReplica,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// RegisterRunRecordActivities registers RecordRun, which the job, experiment and
// pipeline workflows call when they end.
func RegisterRunRecordActivities(r ActivityRegistry, a *activities.RunRecordActivities) {
	r.RegisterActivityWithOptions(a.RecordRun, activity.RegisterOptions{Name: workflows.ActivityRecordRun})
}

// RegisterQuotaActivities registers the workspace quota's activities.
func RegisterQuotaActivities(r ActivityRegistry, a *activities.QuotaActivities) {
	r.RegisterActivityWithOptions(a.RequestQuota, activity.RegisterOptions{Name: workflows.ActivityRequestQuota})
	r.RegisterActivityWithOptions(a.ClosedJobs, activity.RegisterOptions{Name: workflows.ActivityClosedJobs})
}

// RegisterPipelineActivities registers the Pipeline workflow's activities.
func RegisterPipelineActivities(r ActivityRegistry, a *activities.PipelineActivities) {
	r.RegisterActivityWithOptions(a.BuildStepJob, activity.RegisterOptions{Name: workflows.ActivityBuildStepJob})
	r.RegisterActivityWithOptions(a.JobMetrics, activity.RegisterOptions{Name: workflows.ActivityJobMetrics})
	r.RegisterActivityWithOptions(a.StopJob, activity.RegisterOptions{Name: workflows.ActivityStopJob})
}

// RegisterExperimentActivities registers the Experiment workflow's activities.
func RegisterExperimentActivities(r ActivityRegistry, a *activities.ExperimentActivities) {
	r.RegisterActivityWithOptions(a.WatchTrialMetrics, activity.RegisterOptions{Name: workflows.ActivityWatchTrialMetrics})
	r.RegisterActivityWithOptions(a.StopTrialJob, activity.RegisterOptions{Name: workflows.ActivityStopTrialJob})
	r.RegisterActivityWithOptions(a.ReadWarmStart, activity.RegisterOptions{Name: workflows.ActivityReadWarmStart})
}

// RegisterScheduleActivities registers the Schedule workflow's activities.
func RegisterScheduleActivities(r ActivityRegistry, a *activities.ScheduleActivities) {
	r.RegisterActivityWithOptions(a.CheckNewData, activity.RegisterOptions{Name: workflows.ActivityCheckNewData})
	r.RegisterActivityWithOptions(a.WaitScheduledJob, activity.RegisterOptions{Name: workflows.ActivityWaitScheduledJob})
	r.RegisterActivityWithOptions(a.StopScheduledJob, activity.RegisterOptions{Name: workflows.ActivityStopScheduledJob})
	r.RegisterActivityWithOptions(a.ResolvePipelineTemplate, activity.RegisterOptions{Name: workflows.ActivityResolvePipelineTemplate})
}
