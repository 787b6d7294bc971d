package workflows

// Wire names of the Pipeline workflow (docs/pipelines.md). The pipeline answers the same
// query and update names as a job: QueryStatus returns a PipelineView, UpdateStop stops
// the run and returns once it is terminal.
const (
	PipelineWorkflowName = "Pipeline"
)

// Activity names of the Pipeline workflow.
const (
	// ActivityBuildStepJob (a local activity) turns a job step into its TrainingJob:
	// references substituted, defaults applied, validated.
	ActivityBuildStepJob = "BuildStepJob"
	// ActivityJobMetrics reads the last metric values a step's job reported.
	ActivityJobMetrics = "JobMetrics"
	// ActivityStopJob stops a step's job and waits until it is terminal.
	ActivityStopJob = "StopJob"
)

// PipelineWorkflowID is the workflow id of a pipeline run: unique per workspace and
// name.
func PipelineWorkflowID(workspace, name string) string {
	return "dlc/" + workspace + "/pipeline/" + name
}
