package workflows

import (
	"errors"

	"github.com/opendlc/opendlc/schemas"
	"go.temporal.io/sdk/workflow"
)

// The stop update (UpdateStop) of jobs, experiments and pipelines.

// StopRequest asks a job (an experiment, a pipeline run) to stop.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StopResult is the job's phase once the stop has been handled.
type StopResult struct {
	Phase schemas.JobPhase `json:"phase"`
}

// validateStop is the stop update's validator: a reason of at most 1024 characters.
func validateStop(req StopRequest) error {
	if len(req.Reason) > 1024 {
		return errors.New("reason: must be at most 1024 characters")
	}
	return nil
}

// setStopHandler sets the stop update of a job or a pipeline run. The first stop
// asked before the workflow is terminal records its reason in *reason (a default when
// it gives none) and sends on stopCh; every stop answers result() once the workflow is
// terminal.
func setStopHandler[R any](ctx workflow.Context, terminal func() bool, reason *string, stopCh workflow.Channel, result func() R) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateStop,
		func(ctx workflow.Context, req StopRequest) (R, error) {
			if !terminal() && *reason == "" {
				*reason = req.Reason
				if *reason == "" {
					*reason = "stopped by request"
				}
				stopCh.SendAsync(true)
			}
			if err := workflow.Await(ctx, terminal); err != nil {
				var zero R
				return zero, err
			}
			return result(), nil
		},
		workflow.UpdateHandlerOptions{Validator: validateStop},
	)
}
