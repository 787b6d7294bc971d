package workers

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// jobControl adapts a Temporal client to activities.JobControl: it follows and stops
// TrainingJob, Experiment and Pipeline workflows by id.
type jobControl struct{ tc client.Client }

var _ activities.JobControl = jobControl{}

// runResult is the part of a TrainingJobResult, an ExperimentResult and a
// PipelineResult that a schedule records: all three hold a status with a phase (whose
// terminal values have the same names) and a message.
type runResult struct {
	Status struct {
		Phase          schemas.JobPhase `json:"phase"`
		Message        string           `json:"message,omitempty"`
		LastCheckpoint string           `json:"lastCheckpoint,omitempty"`
	} `json:"status"`
}

// WaitJob long-polls the run's workflow for its result.
func (j jobControl) WaitJob(ctx context.Context, workflowID string) (activities.JobOutcome, error) {
	var res runResult
	err := j.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, &res)
	var notFound *serviceerror.NotFound
	var terminated *temporal.TerminatedError
	var canceled *temporal.CanceledError
	switch {
	case err == nil:
		return activities.JobOutcome{Found: true, Phase: res.Status.Phase, LastCheckpoint: res.Status.LastCheckpoint,
			Message: res.Status.Message}, nil
	case errors.As(err, &notFound):
		return activities.JobOutcome{Found: false}, nil
	case errors.As(err, &terminated):
		return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: "the job's workflow was terminated"}, nil
	case errors.As(err, &canceled):
		return activities.JobOutcome{Found: true, Phase: schemas.JobStopped, Message: "the job's workflow was cancelled"}, nil
	case ctx.Err() != nil:
		return activities.JobOutcome{}, ctx.Err()
	}
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: appErr.Message()}, nil
	}
	return activities.JobOutcome{}, fmt.Errorf("wait for %s: %w", workflowID, err)
}

// StopJob sends the run's workflow its stop update (jobs, experiments and pipelines
// all answer "stop" with their phase) and waits until the update completes. A run that
// has already ended, or no longer exists, needs no stopping.
func (j jobControl) StopJob(ctx context.Context, workflowID, reason string) (string, error) {
	h, err := j.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   workflows.UpdateStop,
		Args:         []any{workflows.StopRequest{Reason: reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var res workflows.StopResult
		if err = h.Get(ctx, &res); err == nil {
			return string(res.Phase), nil
		}
	}
	desc, derr := j.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	if errors.As(derr, &notFound) ||
		(derr == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING) {
		return "", nil
	}
	return "", fmt.Errorf("stop %s: %w", workflowID, err)
}
