package workflows

import (
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/schemas"
)

// PipelineStartOptions are the options that start a pipeline run's workflow: its id
// (PipelineWorkflowID), refusing an id that was ever used, and the search attributes
// that list it.
func PipelineStartOptions(p *schemas.Pipeline, taskQueue string) client.StartWorkflowOptions {
	ws, name := p.Metadata.Workspace, p.Metadata.Name
	return client.StartWorkflowOptions{
		ID:                       PipelineWorkflowID(ws, name),
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK answers a duplicate with the existing run instead of an
		// error.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			WorkspaceKey.ValueSet(ws),
			KindKey.ValueSet(string(schemas.KindPipeline)),
			NameKey.ValueSet(name),
			PhaseKey.ValueSet(string(schemas.PipelinePending)),
			LabelsKey.ValueSet(LabelKeywords(p.Metadata.Labels)),
		),
	}
}

// JobStartOptions are the options that start a job's workflow, as the API does: its id
// (JobWorkflowID), refusing an id that was ever used, and the search attributes that
// list it.
func JobStartOptions(job *schemas.TrainingJob, taskQueue string) client.StartWorkflowOptions {
	ws, name := job.Metadata.Workspace, job.Metadata.Name
	return client.StartWorkflowOptions{
		ID:                                       JobWorkflowID(ws, name),
		TaskQueue:                                taskQueue,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			WorkspaceKey.ValueSet(ws),
			KindKey.ValueSet(string(schemas.KindTrainingJob)),
			NameKey.ValueSet(name),
			PhaseKey.ValueSet(string(schemas.JobPending)),
			FrameworkKey.ValueSet(string(job.Spec.Framework)),
			LabelsKey.ValueSet(LabelKeywords(job.Metadata.Labels)),
		),
	}
}
