package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Experiments is the Experiment (HPO) service.
type Experiments struct {
	*temporalBase
	// jobs deletes an experiment's trial jobs with it.
	jobs *Jobs
}

// Start starts a validated experiment in its workspace; it answers it, Pending.
func (s *Experiments) Start(ctx context.Context, exp *schemas.Experiment) (api.ExperimentDetail, error) {
	ws, name := exp.Metadata.Workspace, exp.Metadata.Name
	if err := checkStorage(ctx, s.storage, ws, exp); err != nil {
		return api.ExperimentDetail{}, err
	}
	run, err := s.start(ctx, workflows.ExperimentStart(workflows.ExperimentInput{Experiment: *exp}), "start experiment",
		fmt.Sprintf("experiment %s already exists in workspace %s; choose another name", name, ws))
	if err != nil {
		return api.ExperimentDetail{}, err
	}
	s.log.Info("experiment started", "workspace", ws, "experiment", name, "uid", run.GetRunID())
	return api.ExperimentDetail{UID: run.GetRunID(), Spec: *exp,
		Status: schemas.ExperimentStatus{Phase: schemas.ExperimentPending, MaxTrials: int(exp.Spec.MaxTrials),
			Seed: exp.Spec.Algorithm.Seed, Trials: []schemas.TrialStatus{}}}, nil
}

// Get answers an experiment's spec and live status.
func (s *Experiments) Get(ctx context.Context, ws, name string) (api.ExperimentDetail, error) {
	return getView(ctx, "experiment", ws, name, s.query)
}

func (s *Experiments) query(ctx context.Context, ws, name string) (api.ExperimentDetail, error) {
	return queryView(ctx, s.tc, workflows.ExperimentWorkflowID(ws, name), func(view workflows.ExperimentView) api.ExperimentDetail {
		return api.ExperimentDetail{UID: view.UID, Spec: view.Experiment, Status: view.Status}
	})
}

// List answers one page of a workspace's experiments, newest first.
func (s *Experiments) List(ctx context.Context, ws string, o ListOptions) (api.ExperimentList, error) {
	// An experiment continues as new: it is listed once, by its current run.
	k := runKind[schemas.ExperimentPhase]{kind: schemas.KindExperiment, current: true, failed: schemas.ExperimentFailed,
		final: func(p schemas.ExperimentPhase) bool { return p.Terminal() || p == schemas.ExperimentStopped }}
	items, next, err := listRuns(ctx, s.temporalBase, ws, o, k, func(r listedRun[schemas.ExperimentPhase]) api.ExperimentSummary {
		return api.ExperimentSummary{Workspace: ws, Name: r.Name, UID: r.UID, StartTime: r.Start, EndTime: r.End, Phase: r.Phase}
	})
	return api.ExperimentList{Items: items, NextPageToken: next}, err
}

// Stop stops an experiment's running trials and answers once it is Stopped; an
// experiment that has ended answers with its final phase.
func (s *Experiments) Stop(ctx context.Context, ws, name string, req api.StopRequest) (api.ExperimentActionResult, error) {
	return s.update(ctx, ws, name, workflows.UpdateStop, workflows.StopRequest{Reason: req.Reason})
}

// Resume makes a Stopped experiment carry on.
func (s *Experiments) Resume(ctx context.Context, ws, name string, req api.ResumeRequest) (api.ExperimentActionResult, error) {
	return s.update(ctx, ws, name, workflows.UpdateResume, workflows.ResumeRequest{Reason: req.Reason})
}

// Extend raises an experiment's maxTrials.
func (s *Experiments) Extend(ctx context.Context, ws, name string, req api.ExtendRequest) (api.ExperimentActionResult, error) {
	return s.update(ctx, ws, name, workflows.UpdateExtend, workflows.ExtendRequest{MaxTrials: req.MaxTrials})
}

// Enqueue adds parameter sets that the experiment runs as its next trials.
func (s *Experiments) Enqueue(ctx context.Context, ws, name string, req api.EnqueueRequest) (api.ExperimentActionResult, error) {
	return s.update(ctx, ws, name, workflows.UpdateEnqueue, workflows.EnqueueRequest{Trials: req.Trials})
}

// update sends an update (stop, resume, extend, enqueue) to an experiment and answers with its
// phase once the update was handled. An experiment that has ended answers stop with
// its final phase and refuses resume and extend (ErrConflict).
func (s *Experiments) update(ctx context.Context, ws, name, update string, req any) (api.ExperimentActionResult, error) {
	handle, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.ExperimentWorkflowID(ws, name),
		UpdateName:   update,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res workflows.ExperimentUpdateResult
	if err == nil {
		err = handle.Get(ctx, &res)
	}
	if err == nil {
		return api.ExperimentActionResult{Phase: res.Phase, MaxTrials: res.MaxTrials}, nil
	}
	// The update was refused by its validator: the request does not fit the
	// experiment's state.
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		if update == workflows.UpdateExtend && strings.HasPrefix(appErr.Message(), "maxTrials:") {
			return api.ExperimentActionResult{}, invalid("invalid extend request", "maxTrials",
				strings.TrimSpace(strings.TrimPrefix(appErr.Message(), "maxTrials:")))
		}
		if field, detail, ok := strings.Cut(appErr.Message(), ": "); ok && update == workflows.UpdateEnqueue &&
			strings.HasPrefix(field, "trials") && !strings.Contains(field, " ") {
			return api.ExperimentActionResult{}, invalid("invalid enqueue request", field, detail)
		}
		return api.ExperimentActionResult{}, &Error{Kind: ErrConflict,
			Message: fmt.Sprintf("cannot %s experiment %s: %s", update, name, appErr.Message())}
	}
	// An experiment whose workflow has ended cannot take updates.
	view, qerr := s.query(ctx, ws, name)
	switch {
	case qerr != nil && isNotFound(qerr):
		return api.ExperimentActionResult{}, notFound("experiment", ws, name)
	case qerr == nil && update == workflows.UpdateStop && isNotFound(err):
		return api.ExperimentActionResult{Phase: view.Status.Phase, MaxTrials: view.Status.MaxTrials}, nil
	case qerr == nil && isNotFound(err):
		return api.ExperimentActionResult{}, &Error{Kind: ErrConflict,
			Message: fmt.Sprintf("cannot %s experiment %s: it has ended (%s)", update, name, view.Status.Phase)}
	}
	return api.ExperimentActionResult{}, fmt.Errorf("%s experiment: %w", update, err)
}

// Delete deletes an experiment and its trial jobs, so that its name can be used
// again; it returns once they are gone. A running experiment's trials are stopped
// first (as deleting a job stops it), then its execution (every run, earlier ones
// continued as new) is deleted. The trial jobs are the ones its status names, every
// attempt of each trial.
func (s *Experiments) Delete(ctx context.Context, ws, name string) error {
	return deleteWithJobs(ctx, s.temporalBase, s.jobs, parentDelete[api.ExperimentDetail]{
		kind: "experiment", record: runs.KindExperiment, child: "trial job", query: s.query, jobs: trialJobs,
		stop: func(ctx context.Context, ws, name string) error {
			_, err := s.update(ctx, ws, name, workflows.UpdateStop, workflows.StopRequest{Reason: "deleted"})
			return err
		},
	}, ws, name, workflows.ExperimentWorkflowID(ws, name))
}

// trialJobs names the jobs an experiment's trials ran: every attempt of every trial.
func trialJobs(view api.ExperimentDetail) []string {
	var jobs jobNames
	for _, t := range view.Status.Trials {
		for a := 0; a < t.Attempts; a++ {
			jobs.add(workflows.TrialJobName(view.Spec.Metadata.Name, t.ID, a))
		}
		jobs.add(t.Job)
	}
	return jobs.out
}
