package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workflows"
)

// WithTriggers serves triggers from store. Default none: the trigger routes answer 503.
func WithTriggers(store *triggers.Store) Option { return func(o *Options) { o.Triggers = store } }

// triggersOff answers 503 when the server has no trigger store.
func (s *Server) triggersOff(w http.ResponseWriter) bool {
	if s.opts.Triggers != nil {
		return false
	}
	writeError(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable,
		Message: "this server does not serve triggers: it was started without a trigger store"})
	return true
}

// runPipeline starts a pipeline run from a Pipeline document (YAML or JSON body); the
// query's param=NAME=VALUE entries set its parameters.
func (s *Server) runPipeline(w http.ResponseWriter, r *http.Request) {
	// The role first: the workspace is known once the document is read.
	if !s.authorize(w, r, "", auth.VerbWrite) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	p, err := schemas.DecodePipeline(body)
	if err == nil {
		err = p.Validate().Err()
	}
	if err == nil {
		err = supportedSteps(&p.Spec, schemas.NewPath("spec"))
	}
	if err != nil {
		writeSpecError(w, err)
		return
	}
	given := map[string]string{}
	for _, kv := range r.URL.Query()["param"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid param",
				Details: []schemas.FieldError{{Field: "param", Detail: "must be NAME=VALUE"}}})
			return
		}
		given[k] = v
	}
	values, errs := p.Spec.ResolveParams(given)
	if len(errs) > 0 {
		writeSpecError(w, errs)
		return
	}
	ws, name := p.Metadata.Workspace, p.Metadata.Name
	note(r, ws, "pipeline "+ws+"/"+name)
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	start := workflows.PipelineStart(workflows.PipelineInput{Pipeline: *p, Params: values})
	run, err := s.tc.ExecuteWorkflow(r.Context(), start.ClientOptions(s.opts.TaskQueue), start.WorkflowType, start.Input)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			writeError(w, http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
				Message: fmt.Sprintf("pipeline %s already exists in workspace %s; choose another name", name, ws)})
			return
		}
		s.internal(w, "start pipeline", err)
		return
	}
	s.opts.Logger.Info("pipeline started", "workspace", ws, "pipeline", name, "uid", run.GetRunID())
	writeJSON(w, http.StatusCreated, api.PipelineRun{UID: run.GetRunID(), Spec: *p,
		Status: schemas.PipelineStatus{Phase: schemas.PipelinePending, Params: values}})
}

// supportedSteps checks that every job step's framework runs on this server.
func supportedSteps(spec *schemas.PipelineSpec, p schemas.Path) error {
	var errs schemas.ErrorList
	for i, st := range spec.Steps {
		if st.Job == nil {
			continue
		}
		if _, err := frameworks.Get(st.Job.Framework); err != nil {
			errs = append(errs, schemas.NotSupported(p.Child("steps").Index(i).Child("job", "framework"), frameworks.Supported()))
		}
	}
	return errs.Err()
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	view, err := s.queryPipeline(r.Context(), ws, name)
	if err != nil {
		if isNotFound(err) {
			pipelineNotFound(w, ws, name)
			return
		}
		s.internal(w, "query pipeline", err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) queryPipeline(ctx context.Context, ws, name string) (api.PipelineRun, error) {
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

func pipelineNotFound(w http.ResponseWriter, ws, name string) {
	writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
		Message: fmt.Sprintf("pipeline %s not found in workspace %s", name, ws)})
}

func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	resp, ok := s.listKind(w, r, ws, schemas.KindPipeline, true, "")
	if !ok {
		return
	}
	list := api.PipelineList{Items: []api.PipelineSummary{}, NextPageToken: string(resp.NextPageToken)}
	dc := converter.GetDefaultDataConverter()
	for _, e := range resp.Executions {
		sum := api.PipelineSummary{Workspace: ws, UID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime()}
		fields := e.GetSearchAttributes().GetIndexedFields()
		_ = dc.FromPayload(fields[workflows.SearchAttrName], &sum.Name)
		var phase string
		_ = dc.FromPayload(fields[workflows.SearchAttrPhase], &phase)
		sum.Phase = schemas.PipelinePhase(phase)
		if e.GetCloseTime() != nil {
			t := e.GetCloseTime().AsTime()
			sum.EndTime = &t
			if !sum.Phase.Terminal() {
				// Closed without reaching a terminal phase: terminated by an operator.
				sum.Phase = schemas.PipelineFailed
			}
		}
		list.Items = append(list.Items, sum)
	}
	writeJSON(w, http.StatusOK, list)
}

// stopPipeline stops a run: its running jobs are stopped, the steps not started are
// skipped. It answers once the run is terminal; a run already finished answers with
// its final phase.
func (s *Server) stopPipeline(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	var req workflows.StopRequest
	if !decodeJSON(w, r, &req, smallBodyLimit, true) {
		return
	}
	ctx := r.Context()
	h, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.PipelineWorkflowID(ws, name),
		UpdateName:   workflows.UpdateStop,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var res workflows.PipelineStopResult
		if err = h.Get(ctx, &res); err == nil {
			writeJSON(w, http.StatusOK, api.PipelineStopResult{Phase: res.Phase})
			return
		}
	}
	view, qerr := s.queryPipeline(ctx, ws, name)
	switch {
	case qerr == nil && view.Status.Phase.Terminal():
		writeJSON(w, http.StatusOK, api.PipelineStopResult{Phase: view.Status.Phase})
	case isNotFound(err) && isNotFound(qerr):
		pipelineNotFound(w, ws, name)
	default:
		s.internal(w, "stop pipeline", err)
	}
}

// applyTrigger creates or replaces a trigger (YAML or JSON body).
func (s *Server) applyTrigger(w http.ResponseWriter, r *http.Request) {
	// The role first: the workspace is known once the document is read.
	if !s.authorize(w, r, "", auth.VerbWrite) || s.triggersOff(w) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	t, err := schemas.DecodeTrigger(body)
	if err == nil {
		err = t.Validate().Err()
	}
	if err == nil {
		switch a := t.Spec.Action; {
		case a.Pipeline != nil:
			err = supportedSteps(a.Pipeline, schemas.NewPath("spec", "action", "pipeline"))
		case a.Job != nil:
			if _, ferr := frameworks.Get(a.Job.Framework); ferr != nil {
				err = schemas.ErrorList{schemas.NotSupported(schemas.NewPath("spec", "action", "job", "framework"), frameworks.Supported())}
			}
		}
	}
	if err != nil {
		writeSpecError(w, err)
		return
	}
	note(r, t.Metadata.Workspace, "trigger "+t.Metadata.Workspace+"/"+t.Metadata.Name)
	if !s.authorize(w, r, t.Metadata.Workspace, auth.VerbWrite) {
		return
	}
	if _, err := s.opts.Triggers.Put(r.Context(), t); err != nil {
		var list schemas.ErrorList
		if errors.As(err, &list) {
			writeSpecError(w, err)
			return
		}
		s.internal(w, "store trigger", err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) || s.triggersOff(w) {
		return
	}
	t, err := s.opts.Triggers.Get(r.Context(), ws, name)
	if errors.Is(err, triggers.ErrNotFound) || errors.Is(err, triggers.ErrInvalidName) {
		triggerNotFound(w, ws, name)
		return
	}
	if err != nil {
		s.internal(w, "get trigger", err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) || s.triggersOff(w) {
		return
	}
	list, err := s.opts.Triggers.List(r.Context(), ws)
	if errors.Is(err, triggers.ErrInvalidName) {
		writeJSON(w, http.StatusOK, api.TriggerList{Items: []schemas.Trigger{}})
		return
	}
	if err != nil {
		s.internal(w, "list triggers", err)
		return
	}
	out := api.TriggerList{Items: []schemas.Trigger{}}
	for _, t := range list {
		out.Items = append(out.Items, *t)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteTrigger(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) || s.triggersOff(w) {
		return
	}
	err := s.opts.Triggers.Delete(r.Context(), ws, name)
	if errors.Is(err, triggers.ErrNotFound) || errors.Is(err, triggers.ErrInvalidName) {
		triggerNotFound(w, ws, name)
		return
	}
	if err != nil {
		s.internal(w, "delete trigger", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func triggerNotFound(w http.ResponseWriter, ws, name string) {
	writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
		Message: fmt.Sprintf("trigger %s not found in workspace %s", name, ws)})
}
