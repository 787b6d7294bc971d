package service

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Pipelines is the Pipeline (run) service.
type Pipelines struct{ *temporalBase }

// Start starts a run of a validated pipeline with resolved parameter values; it
// answers the run, Pending.
func (s *Pipelines) Start(ctx context.Context, p *schemas.Pipeline, params map[string]string) (api.PipelineRun, error) {
	ws, name := p.Metadata.Workspace, p.Metadata.Name
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
	view, err := s.query(ctx, ws, name)
	if err != nil {
		if isNotFound(err) {
			return api.PipelineRun{}, notFound("pipeline", ws, name)
		}
		return api.PipelineRun{}, fmt.Errorf("query pipeline: %w", err)
	}
	return view, nil
}

func (s *Pipelines) query(ctx context.Context, ws, name string) (api.PipelineRun, error) {
	v, err := s.tc.QueryWorkflow(ctx, workflows.PipelineWorkflowID(ws, name), "", workflows.QueryStatus)
	if err != nil {
		return api.PipelineRun{}, err
	}
	var view workflows.PipelineView
	if err := v.Get(&view); err != nil {
		return api.PipelineRun{}, err
	}
	return api.PipelineRun{UID: view.UID, Spec: view.Pipeline, Status: view.Status}, nil
}

// List answers one page of a workspace's pipeline runs, newest first.
func (s *Pipelines) List(ctx context.Context, ws string, o ListOptions) (api.PipelineList, error) {
	o.Framework = ""
	execs, next, err := s.list(ctx, ws, schemas.KindPipeline, o, true, "")
	if err != nil {
		return api.PipelineList{}, err
	}
	list := api.PipelineList{Items: []api.PipelineSummary{}, NextPageToken: next}
	for _, e := range execs {
		name, phase := summary(e)
		sum := api.PipelineSummary{Workspace: ws, Name: name, UID: e.GetExecution().GetRunId(),
			StartTime: e.GetStartTime().AsTime(), Phase: schemas.PipelinePhase(phase)}
		if e.GetCloseTime() != nil {
			t := e.GetCloseTime().AsTime()
			sum.EndTime = &t
			if !sum.Phase.Terminal() {
				sum.Phase = schemas.PipelineFailed
			}
		}
		list.Items = append(list.Items, sum)
	}
	return list, nil
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
