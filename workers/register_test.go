package workers

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
)

type names struct{ workflows, activities []string }

func (n *names) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	n.workflows = append(n.workflows, o.Name)
}

func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.activities = append(n.activities, o.Name)
}

// The wire names of the workflows and activities never change: recorded histories and
// running workflows name them.
func TestRegisteredNames(t *testing.T) {
	var n names
	RegisterWorkflows(&n)
	RegisterActivities(&n, &activities.JobActivities{})
	RegisterQuotaActivities(&n, &activities.QuotaActivities{})
	RegisterPipelineActivities(&n, &activities.PipelineActivities{})
	RegisterExperimentActivities(&n, &activities.ExperimentActivities{})
	RegisterScheduleActivities(&n, &activities.ScheduleActivities{})
	slices.Sort(n.workflows)
	slices.Sort(n.activities)
	wantWorkflows := []string{"Experiment", "NodeHealth", "Pipeline", "Schedule", "TrainingJob", "TriggerGate", "WorkspaceQuota"}
	wantActivities := []string{
		"BuildStepJob", "CheckNewData", "CheckNodes", "CleanupGang", "ClosedJobs", "ForwardLogs", "JobMetrics",
		"LatestCheckpoint", "LaunchGang", "LogProgress", "PruneCheckpoints", "PublishEvents", "ReadWarmStart", "RecheckQuarantined", "ReleaseNode", "ReplaceReplica", "RequestQuota", "ResolvePipelineTemplate", "ResolveWorkspace", "ScaleGang",
		"StopGang", "StopJob", "StopScheduledJob", "StopTrialJob", "WaitScheduledJob", "WatchGang", "WatchTrialMetrics",
	}
	if !slices.Equal(n.workflows, wantWorkflows) {
		t.Errorf("workflows registered as %q, want %q", n.workflows, wantWorkflows)
	}
	if !slices.Equal(n.activities, wantActivities) {
		t.Errorf("activities registered as %q, want %q", n.activities, wantActivities)
	}
}
