package service

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Jobs is the TrainingJob service.
type Jobs struct{ *temporalBase }

// Start starts a validated job in its workspace; it answers the job, Pending.
func (s *Jobs) Start(ctx context.Context, job *schemas.TrainingJob) (api.Job, error) {
	ws, name := job.Metadata.Workspace, job.Metadata.Name
	if err := checkStorage(ctx, s.storage, ws, job); err != nil {
		return api.Job{}, err
	}
	spec := workflows.JobStart(workflows.TrainingJobInput{Job: *job})
	exists := fmt.Sprintf("job %s already exists in workspace %s; delete it first or choose another name", name, ws)
	// The start is tried first: a new name (the usual case) costs one call to Temporal.
	// Only a name that is taken is looked at, and started again when its run was
	// deleted (reuseDeletedName).
	run, err := s.start(ctx, spec, "start job", exists)
	if errors.Is(err, ErrAlreadyExists) {
		var reuse bool
		if reuse, err = s.reuseDeletedName(ctx, &spec, ws, name); err == nil {
			if !reuse {
				return api.Job{}, &Error{Kind: ErrAlreadyExists, Message: exists}
			}
			run, err = s.start(ctx, spec, "start job", exists)
		}
	}
	if err != nil {
		return api.Job{}, err
	}
	s.log.Info("job submitted", "workspace", ws, "job", name, "uid", run.GetRunID())
	return api.Job{UID: run.GetRunID(), Spec: *job, Status: schemas.JobStatus{Phase: schemas.JobPending}}, nil
}

// Get answers a job's spec and live status. A deleted job is not found (GetDeleted,
// GetRun read it).
func (s *Jobs) Get(ctx context.Context, ws, name string) (api.Job, error) {
	view, err := getView(ctx, "job", ws, name, s.query)
	if err != nil {
		return view, err
	}
	if err := s.hideDeleted(ctx, ws, name, view.UID); err != nil {
		return api.Job{}, err
	}
	return view, nil
}

func (s *Jobs) query(ctx context.Context, ws, name string) (api.Job, error) {
	return queryView(ctx, s.tc, workflows.JobWorkflowID(ws, name), func(view workflows.JobView) api.Job {
		return api.Job{UID: view.UID, Spec: view.Job, Status: view.Status}
	})
}

// List answers one page of a workspace's jobs, newest first.
func (s *Jobs) List(ctx context.Context, ws string, o ListOptions) (api.JobList, error) {
	// A job that continued as new (workflows/continue_as_new.go) is listed once, by
	// its current run.
	k := runKind[schemas.JobPhase]{kind: schemas.KindTrainingJob, current: true, final: schemas.JobPhase.Terminal, failed: schemas.JobFailed}
	items, next, err := listRuns(ctx, s.temporalBase, ws, o, k, func(r listedRun[schemas.JobPhase]) api.JobSummary {
		return api.JobSummary{Workspace: ws, Name: r.Name, UID: r.UID, StartTime: r.Start, EndTime: r.End, Phase: r.Phase,
			Framework: schemas.Framework(r.Framework)}
	})
	if err != nil {
		return api.JobList{}, err
	}
	if items, err = s.withoutDeleted(ctx, ws, items); err != nil {
		return api.JobList{}, err
	}
	return api.JobList{Items: items, NextPageToken: next}, nil
}

// Stop asks a job to stop and waits until it is terminal. A job that has already
// finished answers with its final phase.
func (s *Jobs) Stop(ctx context.Context, ws, name string, req api.StopRequest) (api.StopResult, error) {
	res, err := s.stop(ctx, ws, name, workflows.StopRequest{Reason: req.Reason})
	if err != nil {
		if isNotFound(err) {
			return api.StopResult{}, notFound("job", ws, name)
		}
		return api.StopResult{}, fmt.Errorf("stop job: %w", err)
	}
	return res, nil
}

func (s *Jobs) stop(ctx context.Context, ws, name string, req workflows.StopRequest) (api.StopResult, error) {
	// While the job's workflow task is failing (a large job's task timing out on a
	// loaded worker), the stop is asked again until ctx ends rather than refused.
	var res workflows.StopResult
	err := s.updateWhenReady(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.JobWorkflowID(ws, name),
		UpdateName:   workflows.UpdateStop,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}, &res)
	if err == nil {
		return api.StopResult{Phase: res.Phase}, nil
	}
	// A job that has already finished (or is finishing) cannot take the update: answer
	// with its final phase.
	view, qerr := s.query(ctx, ws, name)
	if qerr == nil && view.Status.Phase.Terminal() {
		return api.StopResult{Phase: view.Status.Phase}, nil
	}
	return api.StopResult{}, err
}

// Terminal reports whether a job is in a terminal phase (a log follower's end).
func (s *Jobs) Terminal(ctx context.Context, ws, name string) bool {
	v, err := s.query(ctx, ws, name)
	return err == nil && v.Status.Phase.Terminal()
}
