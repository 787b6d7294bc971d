// Package workflows holds OpenDLC's durable state machines: one Temporal workflow per
// training job (and later per experiment and schedule). Workflow code is deterministic:
// it reads time only through workflow.Now, waits only through workflow timers, and
// ranges over maps only after sorting.
package workflows

// Task queues.
const (
	// TaskQueue is where the control plane's workflows and activities run.
	TaskQueue = "opendlc"
)

// Workflow type names. Go identifiers are not wire names: renaming a function must not
// break running workflows.
const (
	TrainingJobWorkflowName = "TrainingJob"
)

// Query, update and signal names.
const (
	// QueryStatus returns a JobView.
	QueryStatus = "status"
	// UpdateStop stops a job and returns once it is Stopped (or already terminal).
	UpdateStop = "stop"
)

// Activity names.
const (
	ActivityPublishEvents    = "PublishEvents"
	ActivityLaunchGang       = "LaunchGang"
	ActivityWatchGang        = "WatchGang"
	ActivityStopGang         = "StopGang"
	ActivityCleanupGang      = "CleanupGang"
	ActivityForwardLogs      = "ForwardLogs"
	ActivityLatestCheckpoint = "LatestCheckpoint"
	ActivityResolveWorkspace = "ResolveWorkspace"
	ActivityLogProgress      = "LogProgress"
)

// Search attributes the workflows set. They must be registered on the Temporal
// namespace (dlc up does it; see docs/operations.md for an existing cluster).
const (
	SearchAttrWorkspace = "DlcWorkspace"
	SearchAttrKind      = "DlcKind"
	SearchAttrPhase     = "DlcPhase"
	SearchAttrName      = "DlcName"
	SearchAttrOwner     = "DlcOwner"
	SearchAttrFramework = "DlcFramework"
	// SearchAttrLabels (KeywordList) holds a job's labels as "key=value".
	SearchAttrLabels = "DlcLabels"
)

// JobWorkflowID is the workflow id of a job: unique per workspace and name.
func JobWorkflowID(workspace, name string) string {
	return "dlc/" + workspace + "/job/" + name
}
