package service

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Pipelines is the Pipeline (run) service.
type Pipelines struct {
	*temporalBase
	// jobs deletes a run's step jobs.
	jobs *Jobs
}

// Start starts a run of a validated pipeline with resolved parameter values; it
// answers the run, Pending.
func (s *Pipelines) Start(ctx context.Context, p *schemas.Pipeline, params map[string]string) (api.PipelineRun, error) {
	ws, name := p.Metadata.Workspace, p.Metadata.Name
	if err := checkStorage(ctx, s.storage, ws, p); err != nil {
		return api.PipelineRun{}, err
	}
	run, err := s.start(ctx, workflows.PipelineStart(workflows.PipelineInput{Pipeline: *p, Params: params}), "start pipeline",
		fmt.Sprintf("pipeline %s already exists in workspace %s; choose another name", name, ws))
	if err != nil {
		return api.PipelineRun{}, err
	}
	s.log.Info("pipeline started", "workspace", ws, "pipeline", name, "uid", run.GetRunID())
	return api.PipelineRun{UID: run.GetRunID(), Spec: *p,
		Status: schemas.PipelineStatus{Phase: schemas.PipelinePending, Params: params}}, nil
}

// Get answers a pipeline run and the live status of every step.
func (s *Pipelines) Get(ctx context.Context, ws, name string) (api.PipelineRun, error) {
	return getView(ctx, "pipeline", ws, name, s.query)
}

func (s *Pipelines) query(ctx context.Context, ws, name string) (api.PipelineRun, error) {
	return queryView(ctx, s.tc, workflows.PipelineWorkflowID(ws, name), func(view workflows.PipelineView) api.PipelineRun {
		return api.PipelineRun{UID: view.UID, Spec: view.Pipeline, Status: view.Status}
	})
}

// List answers one page of a workspace's pipeline runs, newest first.
func (s *Pipelines) List(ctx context.Context, ws string, o ListOptions) (api.PipelineList, error) {
	k := runKind[schemas.PipelinePhase]{kind: schemas.KindPipeline, final: schemas.PipelinePhase.Terminal, failed: schemas.PipelineFailed}
	items, next, err := listRuns(ctx, s.temporalBase, ws, o, k, func(r listedRun[schemas.PipelinePhase]) api.PipelineSummary {
		return api.PipelineSummary{Workspace: ws, Name: r.Name, UID: r.UID, StartTime: r.Start, EndTime: r.End, Phase: r.Phase}
	})
	return api.PipelineList{Items: items, NextPageToken: next}, err
}

// Stop stops a pipeline run (its jobs are stopped) and answers once it is terminal;
// a run that has ended answers with its final phase.
func (s *Pipelines) Stop(ctx context.Context, ws, name string, req api.StopRequest) (api.PipelineStopResult, error) {
	h, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.PipelineWorkflowID(ws, name),
		UpdateName:   workflows.UpdateStop,
		Args:         []any{workflows.StopRequest{Reason: req.Reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var res workflows.PipelineStopResult
		if err = h.Get(ctx, &res); err == nil {
			return api.PipelineStopResult{Phase: res.Phase}, nil
		}
	}
	view, qerr := s.query(ctx, ws, name)
	switch {
	case qerr == nil && view.Status.Phase.Terminal():
		return api.PipelineStopResult{Phase: view.Status.Phase}, nil
	case isNotFound(err) && isNotFound(qerr):
		return api.PipelineStopResult{}, notFound("pipeline", ws, name)
	}
	return api.PipelineStopResult{}, fmt.Errorf("stop pipeline: %w", err)
}

// Delete deletes a pipeline run and its step jobs, so that its name can be used
// again; it returns once they are gone. A running run is stopped first (its jobs are
// stopped, as deleting a job stops it), then its execution (every run of its workflow
// id) is deleted. The step jobs are the ones its status names.
func (s *Pipelines) Delete(ctx context.Context, ws, name string) error {
	return deleteWithJobs(ctx, s.temporalBase, s.jobs, parentDelete[api.PipelineRun]{
		kind: "pipeline", record: runs.KindPipeline, child: "step job", query: s.query, jobs: stepJobs,
		stop: func(ctx context.Context, ws, name string) error {
			if _, err := s.Stop(ctx, ws, name, api.StopRequest{Reason: "deleted"}); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			return nil
		},
	}, ws, name, workflows.PipelineWorkflowID(ws, name))
}

// stepJobs names the jobs a pipeline run's job steps ran: the job its status names
// for each step, each retry's (schemas.StepRetryJobName), each fan-out child's
// (schemas.StepItemJobName), and the name every job
// step's first job is given (schemas.StepJobName).
func stepJobs(view api.PipelineRun) []string {
	var jobs jobNames
	for _, st := range view.Status.Steps {
		jobs.add(st.Job)
		// Every try of a step with retries ran a job of its own.
		for try := 1; try <= st.Attempts; try++ {
			jobs.add(schemas.StepRetryJobName(view.Spec.Metadata.Name, st.Name, try))
		}
		// A fan-out step ran a job per item.
		for _, c := range st.Children {
			jobs.add(c.Job)
		}
	}
	for _, st := range view.Spec.Spec.Steps {
		if st.Job != nil {
			jobs.add(schemas.StepJobName(view.Spec.Metadata.Name, st.Name))
		}
	}
	return jobs.out
}
