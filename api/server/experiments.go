package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// The experiment routes join the route table, which registers them and documents them.
func init() {
	routes = append(routes, experimentRoutes...)
}

var experimentRoutes = []route{
	{method: "POST", path: "/v1/experiments", handler: (*Server).createExperiment, object: "experiment",
		id: "createExperiment", tag: "experiments", summary: "Validate and start an HPO experiment in the spec's workspace",
		request:   &payload{v: schemas.Experiment{}, media: specMedia},
		responses: []reply{{201, "the experiment, Pending", jsonBody(api.ExperimentDetail{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/experiments", handler: (*Server).listExperiments, object: "experiment",
		id: "listExperiments", tag: "experiments", summary: "List a workspace's experiments, newest first",
		query: []param{
			{name: "phase", typ: "string", desc: "only experiments in this phase"},
			{name: "label", typ: "string", repeat: true, desc: "key=value; repeatable, all must match"},
			{name: "limit", typ: "integer", desc: "page size, 1 to 1000; default 100"},
			{name: "pageToken", typ: "string", desc: "the previous page's nextPageToken"},
		},
		responses: []reply{{200, "a page of experiments", jsonBody(api.ExperimentList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/experiments/{name}", handler: (*Server).getExperiment, object: "experiment",
		id: "getExperiment", tag: "experiments", summary: "An experiment's spec and live status: every trial, the best",
		responses: []reply{{200, "the experiment", jsonBody(api.ExperimentDetail{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/stop", handler: (*Server).stopExperiment, object: "experiment",
		id: "stopExperiment", tag: "experiments", summary: "Stop an experiment's running trials; answers once it is Stopped (resume carries on)",
		request:   &payload{v: workflows.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the phase", jsonBody(api.ExperimentActionResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/resume", handler: (*Server).resumeExperiment, object: "experiment",
		id: "resumeExperiment", tag: "experiments", summary: "Resume a Stopped experiment: its stopped trials run again, then new ones",
		request:   &payload{v: workflows.ResumeRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the phase", jsonBody(api.ExperimentActionResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/extend", handler: (*Server).extendExperiment, object: "experiment",
		id: "extendExperiment", tag: "experiments", summary: "Raise an experiment's maxTrials",
		request:   jsonBody(api.ExtendRequest{}),
		responses: []reply{{200, "the phase and the new limit", jsonBody(api.ExperimentActionResult{})}}},
}

func (s *Server) createExperiment(w http.ResponseWriter, r *http.Request) {
	// The role first: the workspace is known once the document is read.
	if !s.authorize(w, r, "", auth.VerbWrite) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	exp, err := schemas.DecodeExperiment(body)
	if err == nil {
		err = exp.Validate().Err()
	}
	if err == nil {
		if _, ferr := frameworks.Get(exp.Spec.TrialTemplate.Framework); ferr != nil {
			err = schemas.ErrorList{schemas.NotSupported(schemas.NewPath("spec", "trialTemplate", "framework"), frameworks.Supported())}
		}
	}
	if err != nil {
		writeSpecError(w, err)
		return
	}
	ws, name := exp.Metadata.Workspace, exp.Metadata.Name
	note(r, ws, "experiment "+ws+"/"+name)
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	run, err := s.tc.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:                       workflows.ExperimentWorkflowID(ws, name),
		TaskQueue:                s.opts.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK answers a duplicate with the existing run.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.WorkspaceKey.ValueSet(ws),
			workflows.KindKey.ValueSet(string(schemas.KindExperiment)),
			workflows.NameKey.ValueSet(name),
			workflows.PhaseKey.ValueSet(string(schemas.ExperimentPending)),
			workflows.LabelsKey.ValueSet(workflows.LabelKeywords(exp.Metadata.Labels)),
		),
	}, workflows.ExperimentWorkflowName, workflows.ExperimentInput{Experiment: *exp})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			writeError(w, http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
				Message: fmt.Sprintf("experiment %s already exists in workspace %s; choose another name", name, ws)})
			return
		}
		s.internal(w, "start experiment", err)
		return
	}
	s.opts.Logger.Info("experiment started", "workspace", ws, "experiment", name, "uid", run.GetRunID())
	writeJSON(w, http.StatusCreated, api.ExperimentDetail{UID: run.GetRunID(), Spec: *exp,
		Status: schemas.ExperimentStatus{Phase: schemas.ExperimentPending, MaxTrials: int(exp.Spec.MaxTrials),
			Seed: exp.Spec.Algorithm.Seed, Trials: []schemas.TrialStatus{}}})
}

func (s *Server) getExperiment(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	view, err := s.queryExperiment(r.Context(), ws, name)
	if err != nil {
		if isNotFound(err) {
			experimentNotFound(w, ws, name)
			return
		}
		s.internal(w, "query experiment", err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) queryExperiment(ctx context.Context, ws, name string) (api.ExperimentDetail, error) {
	v, err := s.tc.QueryWorkflow(ctx, workflows.ExperimentWorkflowID(ws, name), "", workflows.QueryStatus)
	if err != nil {
		return api.ExperimentDetail{}, err
	}
	var view workflows.ExperimentView
	if err := v.Get(&view); err != nil {
		return api.ExperimentDetail{}, err
	}
	return api.ExperimentDetail{UID: view.UID, Spec: view.Experiment, Status: view.Status}, nil
}

func experimentNotFound(w http.ResponseWriter, ws, name string) {
	writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
		Message: fmt.Sprintf("experiment %s not found in workspace %s", name, ws)})
}

func (s *Server) listExperiments(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	resp, ok := s.listKind(w, r, ws, schemas.KindExperiment, true, "")
	if !ok {
		return
	}
	list := api.ExperimentList{Items: []api.ExperimentSummary{}, NextPageToken: string(resp.NextPageToken)}
	dc := converter.GetDefaultDataConverter()
	for _, e := range resp.Executions {
		// An experiment that continued as new is listed once, by its current run.
		if e.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			continue
		}
		sum := api.ExperimentSummary{Workspace: ws, UID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime()}
		fields := e.GetSearchAttributes().GetIndexedFields()
		_ = dc.FromPayload(fields[workflows.SearchAttrName], &sum.Name)
		var phase string
		_ = dc.FromPayload(fields[workflows.SearchAttrPhase], &phase)
		sum.Phase = schemas.ExperimentPhase(phase)
		if e.GetCloseTime() != nil {
			t := e.GetCloseTime().AsTime()
			sum.EndTime = &t
			if !sum.Phase.Terminal() && sum.Phase != schemas.ExperimentStopped {
				// Closed without reaching a final phase: terminated by an operator.
				sum.Phase = schemas.ExperimentFailed
			}
		}
		list.Items = append(list.Items, sum)
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) stopExperiment(w http.ResponseWriter, r *http.Request) {
	var req workflows.StopRequest
	s.experimentUpdate(w, r, workflows.UpdateStop, &req, true)
}

func (s *Server) resumeExperiment(w http.ResponseWriter, r *http.Request) {
	var req workflows.ResumeRequest
	s.experimentUpdate(w, r, workflows.UpdateResume, &req, true)
}

func (s *Server) extendExperiment(w http.ResponseWriter, r *http.Request) {
	var req workflows.ExtendRequest
	s.experimentUpdate(w, r, workflows.UpdateExtend, &req, false)
}

// experimentUpdate sends an update (stop, resume, extend) to an experiment and answers
// with its phase once the update was handled. An experiment that has ended answers
// stop with its final phase and refuses resume and extend (409).
func (s *Server) experimentUpdate(w http.ResponseWriter, r *http.Request, update string, req any, allowEmpty bool) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	if !decodeJSON(w, r, req, smallBodyLimit, allowEmpty) {
		return
	}
	ctx := r.Context()
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
		writeJSON(w, http.StatusOK, api.ExperimentActionResult{Phase: res.Phase, MaxTrials: res.MaxTrials})
		return
	}
	// The update was refused by its validator: the request does not fit the
	// experiment's state.
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if update == workflows.UpdateExtend && strings.HasPrefix(appErr.Message(), "maxTrials:") {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid extend request",
				Details: []schemas.FieldError{{Field: "maxTrials", Detail: strings.TrimSpace(strings.TrimPrefix(appErr.Message(), "maxTrials:"))}}})
			return
		}
		writeError(w, http.StatusConflict, api.Error{Code: api.CodeFailedPrecondition,
			Message: fmt.Sprintf("cannot %s experiment %s: %s", update, name, appErr.Message())})
		return
	}
	// An experiment whose workflow has ended cannot take updates.
	view, qerr := s.queryExperiment(ctx, ws, name)
	switch {
	case qerr != nil && isNotFound(qerr):
		experimentNotFound(w, ws, name)
	case qerr == nil && update == workflows.UpdateStop && isNotFound(err):
		writeJSON(w, http.StatusOK, api.ExperimentActionResult{Phase: view.Status.Phase, MaxTrials: view.Status.MaxTrials})
	case qerr == nil && isNotFound(err):
		writeError(w, http.StatusConflict, api.Error{Code: api.CodeFailedPrecondition,
			Message: fmt.Sprintf("cannot %s experiment %s: it has ended (%s)", update, name, view.Status.Phase)})
	default:
		s.internal(w, update+" experiment", err)
	}
}
