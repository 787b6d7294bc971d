package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Scale sets a running elastic job's replica count and answers once the gang has it:
// replicas are added or removed, the others keep running. A count outside
// spec.elastic's [minReplicas, maxReplicas], or a job that is not elastic, is
// ErrInvalid; a job that is not Running is ErrConflict; both name the field replicas
// and change nothing.
func (s *Jobs) Scale(ctx context.Context, ws, name string, req api.ScaleRequest) (api.ScaleResult, error) {
	view, err := s.query(ctx, ws, name)
	if err != nil {
		if isNotFound(err) {
			return api.ScaleResult{}, notFound("job", ws, name)
		}
		return api.ScaleResult{}, fmt.Errorf("scale job: %w", err)
	}
	if req.Replicas < 1 {
		return api.ScaleResult{}, invalid("replicas: must be at least 1", "replicas", "must be at least 1")
	}
	if _, err := backend.ScaledJob(&view.Spec, req.Replicas); err != nil {
		return api.ScaleResult{}, invalid(err.Error(), "replicas", strings.TrimPrefix(err.Error(), "replicas: "))
	}
	if view.Status.Phase != schemas.JobRunning {
		return api.ScaleResult{}, notRunning(name, view.Status.Phase)
	}
	handle, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.JobWorkflowID(ws, name),
		UpdateName:   workflows.UpdateScale,
		Args:         []any{workflows.ScaleRequest{Replicas: req.Replicas}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res workflows.ScaleResult
	if err == nil {
		err = handle.Get(ctx, &res)
	}
	if err != nil {
		if isNotFound(err) {
			return api.ScaleResult{}, notFound("job", ws, name)
		}
		// The workflow's validator refused it (the job left Running meanwhile), or
		// the backend could not change the gang.
		msg := rootMessage(err)
		return api.ScaleResult{}, &Error{Kind: ErrConflict, Message: msg,
			Fields: []schemas.FieldError{{Field: "replicas", Detail: strings.TrimPrefix(msg, "replicas: ")}}}
	}
	return api.ScaleResult{DesiredReplicas: res.DesiredReplicas, CurrentReplicas: res.CurrentReplicas, Phase: res.Phase}, nil
}

func notRunning(name string, phase schemas.JobPhase) error {
	msg := fmt.Sprintf("replicas: job %s is %s; only a Running job can be scaled", name, phase)
	return &Error{Kind: ErrConflict, Message: msg,
		Fields: []schemas.FieldError{{Field: "replicas", Detail: strings.TrimPrefix(msg, "replicas: ")}}}
}

// rootMessage is the innermost error's message.
func rootMessage(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
