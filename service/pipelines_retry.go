package service

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// maxRetryNames bounds how many names <run>-retry-<N> Retry tries when the first
// free one is taken meanwhile.
const maxRetryNames = 20

// retrySuffixRE finds the number of a retry's name: <run>-retry-<N>.
var retrySuffixRE = regexp.MustCompile(`^(.+)-retry-([0-9]+)$`)

// Retry starts a retry of a run that ended Failed or Stopped: a new run of the same
// pipeline and parameters, named name or else <run>-retry-<N> (N from 1, counting
// on from a retry's own N), in which the steps that succeeded are not run again but
// keep their outputs and metrics (workflows.PipelineReuse); the failed, cancelled and
// skipped steps, and the onExit steps, run. It answers the new run, Pending.
func (s *Pipelines) Retry(ctx context.Context, ws, source string, req api.PipelineRetryRequest) (api.PipelineRun, error) {
	src, err := s.Get(ctx, ws, source)
	if err != nil {
		return api.PipelineRun{}, err
	}
	if ph := src.Status.Phase; ph != schemas.PipelineFailed && ph != schemas.PipelineStopped {
		return api.PipelineRun{}, &Error{Kind: ErrConflict,
			Message: fmt.Sprintf("pipeline %s is %s: only a Failed or Stopped run can be retried", source, ph)}
	}
	reuse := &workflows.PipelineReuse{From: source}
	for _, st := range src.Status.Steps {
		if st.Phase == schemas.StepSucceeded && !st.OnExit {
			reuse.Steps = append(reuse.Steps, st)
		}
	}
	names := []string{req.Name}
	if req.Name == "" {
		names = retryNames(source)
	}
	if err := checkStorage(ctx, s.storage, ws, &src.Spec); err != nil {
		return api.PipelineRun{}, err
	}
	for _, name := range names {
		p := src.Spec
		p.Metadata.Name = name
		if errs := p.Validate(); len(errs) > 0 {
			return api.PipelineRun{}, &Error{Kind: ErrInvalidObject,
				Message: fmt.Sprintf("the retry %s of pipeline %s is invalid", name, source), Fields: fieldsOf(errs, "name")}
		}
		run, err := s.start(ctx, workflows.PipelineStart(workflows.PipelineInput{Pipeline: p, Params: src.Status.Params, Reused: reuse}),
			"start pipeline retry", fmt.Sprintf("pipeline %s already exists in workspace %s; choose another name", name, ws))
		if errors.Is(err, ErrAlreadyExists) && req.Name == "" {
			continue
		}
		if err != nil {
			return api.PipelineRun{}, err
		}
		s.log.Info("pipeline retry started", "workspace", ws, "pipeline", name, "retries", source, "reused", len(reuse.Steps), "uid", run.GetRunID())
		return api.PipelineRun{UID: run.GetRunID(), Spec: p,
			Status: schemas.PipelineStatus{Phase: schemas.PipelinePending, Params: src.Status.Params}}, nil
	}
	return api.PipelineRun{}, &Error{Kind: ErrAlreadyExists,
		Message: fmt.Sprintf("pipeline %s has %d retries already; name the retry", source, maxRetryNames)}
}

// retryNames are the names Retry tries for a retry of run, in order.
func retryNames(run string) []string {
	base, n := run, 0
	if m := retrySuffixRE.FindStringSubmatch(run); m != nil {
		base = m[1]
		n, _ = strconv.Atoi(m[2])
	}
	out := make([]string, maxRetryNames)
	for i := range out {
		out[i] = fmt.Sprintf("%s-retry-%d", base, n+1+i)
	}
	return out
}

// fieldsOf are a retry's validation errors; metadata.name's is reported as the
// request's field.
func fieldsOf(errs schemas.ErrorList, nameField string) []schemas.FieldError {
	out := make([]schemas.FieldError, len(errs))
	for i, e := range errs {
		out[i] = *e
		if e.Field == "metadata.name" {
			out[i].Field = nameField
		}
	}
	return out
}
