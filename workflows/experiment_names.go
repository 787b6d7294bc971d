package workflows

import "strconv"

// Wire names of the Experiment workflow. Its status query is QueryStatus ("status") and
// its stop update UpdateStop ("stop"), as for jobs.
const (
	ExperimentWorkflowName = "Experiment"

	// UpdateResume makes a Stopped experiment carry on (ResumeRequest → ExperimentUpdateResult).
	UpdateResume = "resume"
	// UpdateExtend raises an experiment's maxTrials (ExtendRequest → ExperimentUpdateResult).
	UpdateExtend = "extend"
	// UpdateEnqueue adds parameter sets for the next trials (EnqueueRequest →
	// ExperimentUpdateResult).
	UpdateEnqueue = "enqueue"

	ActivityWatchTrialMetrics = "WatchTrialMetrics"
	ActivityStopTrialJob      = "StopTrialJob"
	ActivityReadWarmStart     = "ReadWarmStart"
)

// ExperimentWorkflowID is the workflow id of an experiment: unique per workspace and name.
func ExperimentWorkflowID(workspace, name string) string {
	return "dlc/" + workspace + "/experiment/" + name
}

// TrialJobName is the name of the job that runs trial id of an experiment: <exp>-t<id>,
// and <exp>-t<id>-r<attempt> for a retry.
func TrialJobName(experiment string, id, attempt int) string {
	name := experiment + "-t" + strconv.Itoa(id)
	if attempt > 0 {
		name += "-r" + strconv.Itoa(attempt)
	}
	return name
}
