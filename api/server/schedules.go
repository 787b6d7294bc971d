package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// memoCreateTime is the memo key of a schedule's creation time (the workflow's own
// start time changes with every continue-as-new).
const memoCreateTime = "createTime"

// scheduleRoutes are the schedule operations; init adds them to the route table, which
// serves, authenticates and documents them like every other route.
var scheduleRoutes = []route{
	{method: "POST", path: "/v1/schedules", handler: (*Server).createSchedule, object: "schedule",
		id: "createSchedule", tag: "schedules", summary: "Validate and create a schedule in the spec's workspace",
		request:   &payload{v: schemas.Schedule{}, media: specMedia},
		responses: []reply{{201, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/schedules", handler: (*Server).listSchedules, object: "schedule",
		id: "listSchedules", tag: "schedules", summary: "List a workspace's schedules",
		query: []param{
			{name: "limit", typ: "integer", desc: "page size, 1 to 1000; default 100"},
			{name: "pageToken", typ: "string", desc: "the previous page's nextPageToken"},
		},
		responses: []reply{{200, "a page of schedules", jsonBody(api.ScheduleList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).getSchedule, object: "schedule",
		id: "getSchedule", tag: "schedules", summary: "A schedule's spec, next fire times, running runs and history",
		query:     []param{{name: "next", typ: "integer", desc: "how many next fire times, 1 to 100; default 5"}},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "PUT", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).updateSchedule, object: "schedule",
		id: "updateSchedule", tag: "schedules", summary: "Replace a schedule's spec; the next fire time follows at once",
		request:   &payload{v: schemas.Schedule{}, media: specMedia},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/pause", handler: (*Server).pauseSchedule, object: "schedule",
		id: "pauseSchedule", tag: "schedules", summary: "Pause scheduled runs; times that pass while paused are not caught up",
		request:   &payload{v: api.PauseScheduleRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/resume", handler: (*Server).resumeSchedule, object: "schedule",
		id: "resumeSchedule", tag: "schedules", summary: "Resume scheduled runs",
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/trigger", handler: (*Server).triggerSchedule, object: "schedule",
		id: "triggerSchedule", tag: "schedules", summary: "Run the schedule's action now",
		request:   &payload{v: api.TriggerScheduleRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the run", jsonBody(api.TriggerScheduleResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/backfill", handler: (*Server).backfillSchedule, object: "schedule",
		id: "backfillSchedule", tag: "schedules", summary: "Run every time of [from, to) the schedule names, once each",
		request:   jsonBody(api.BackfillScheduleRequest{}),
		responses: []reply{{200, "the backfill's runs", jsonBody(api.BackfillScheduleResult{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).deleteSchedule, object: "schedule",
		id: "deleteSchedule", tag: "schedules", summary: "Delete a schedule; jobs it started are left alone",
		responses: []reply{{204, "deleted", nil}}},
}

func init() { routes = append(routes, scheduleRoutes...) }

// readSchedule reads, decodes, validates and checks a schedule document; on failure it
// has written the error response and returns nil.
func (s *Server) readSchedule(w http.ResponseWriter, r *http.Request) *schemas.Schedule {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil
	}
	sched, err := schemas.DecodeSchedule(body)
	if err == nil {
		err = sched.Validate().Err()
	}
	if err == nil {
		err = scheduleSupported(sched)
	}
	if err != nil {
		writeSpecError(w, err)
		return nil
	}
	return sched
}

// scheduleSupported checks that the frameworks a schedule's template names run on this
// server, as the job, experiment or pipeline it starts would be checked.
func scheduleSupported(sched *schemas.Schedule) error {
	ap := schemas.NewPath("spec", "action")
	a := sched.Spec.Action
	framework := func(f schemas.Framework, p schemas.Path) error {
		if _, err := frameworks.Get(f); err != nil {
			return schemas.ErrorList{schemas.NotSupported(p, frameworks.Supported())}
		}
		return nil
	}
	switch {
	case a.JobTemplate != nil:
		return framework(a.JobTemplate.Spec.Framework, ap.Child("jobTemplate", "spec", "framework"))
	case a.ExperimentTemplate != nil:
		return framework(a.ExperimentTemplate.Spec.TrialTemplate.Framework, ap.Child("experimentTemplate", "spec", "trialTemplate", "framework"))
	case a.PipelineTemplate != nil:
		return supportedSteps(&a.PipelineTemplate.Spec, ap.Child("pipelineTemplate", "spec"))
	}
	return nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbWrite) {
		return
	}
	sched := s.readSchedule(w, r)
	if sched == nil {
		return
	}
	ws, name := sched.Metadata.Workspace, sched.Metadata.Name
	note(r, ws, "schedule "+ws+"/"+name)
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	phase := workflows.SchedulePhaseActive
	if sched.Spec.Paused {
		phase = workflows.SchedulePhasePaused
	}
	now := time.Now().UTC()
	_, err := s.tc.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:        workflows.ScheduleWorkflowID(ws, name),
		TaskQueue: s.opts.TaskQueue,
		// A deleted schedule's name may be used again; a live one's may not.
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.WorkspaceKey.ValueSet(ws),
			workflows.KindKey.ValueSet(string(schemas.KindSchedule)),
			workflows.NameKey.ValueSet(name),
			workflows.PhaseKey.ValueSet(phase),
			workflows.LabelsKey.ValueSet(workflows.LabelKeywords(sched.Metadata.Labels)),
		),
		Memo: map[string]any{workflows.MemoCron: sched.Spec.Cron, workflows.MemoTimeZone: sched.Spec.TimeZone,
			memoCreateTime: now},
	}, workflows.ScheduleWorkflowName, workflows.ScheduleInput{Schedule: *sched})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			writeError(w, http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
				Message: fmt.Sprintf("schedule %s already exists in workspace %s; update or delete it", name, ws)})
			return
		}
		s.internal(w, "create schedule", err)
		return
	}
	s.opts.Logger.Info("schedule created", "workspace", ws, "schedule", name)
	writeJSON(w, http.StatusCreated, api.ScheduleView{Spec: *sched,
		Status: schemas.ScheduleStatus{Paused: sched.Spec.Paused, PauseNote: sched.Spec.PauseNote, CreateTime: now}})
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	next := 5
	if v := r.URL.Query().Get("next"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid next",
				Details: []schemas.FieldError{{Field: "next", Detail: "must be an integer between 1 and 100"}}})
			return
		}
		next = n
	}
	v, err := s.tc.QueryWorkflow(r.Context(), workflows.ScheduleWorkflowID(ws, name), "", workflows.QueryStatus,
		workflows.ScheduleQuery{Next: next})
	if err != nil {
		s.scheduleError(w, ws, name, "get schedule", err)
		return
	}
	var view workflows.ScheduleView
	if err := v.Get(&view); err != nil {
		s.internal(w, "get schedule", err)
		return
	}
	writeJSON(w, http.StatusOK, api.ScheduleView{Spec: view.Schedule, Status: view.Status})
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	// Runs that continued as new are closed; the live run of each schedule is running.
	resp, ok := s.listKind(w, r, ws, schemas.KindSchedule, false, `ExecutionStatus = "Running"`)
	if !ok {
		return
	}
	list := api.ScheduleList{Items: []api.ScheduleSummary{}, NextPageToken: string(resp.NextPageToken)}
	dc := converter.GetDefaultDataConverter()
	for _, e := range resp.Executions {
		sum := api.ScheduleSummary{Workspace: ws, CreateTime: e.GetStartTime().AsTime()}
		fields := e.GetSearchAttributes().GetIndexedFields()
		_ = dc.FromPayload(fields[workflows.SearchAttrName], &sum.Name)
		var phase string
		_ = dc.FromPayload(fields[workflows.SearchAttrPhase], &phase)
		sum.Paused = phase == workflows.SchedulePhasePaused
		memo := e.GetMemo().GetFields()
		_ = dc.FromPayload(memo[workflows.MemoCron], &sum.Cron)
		_ = dc.FromPayload(memo[workflows.MemoTimeZone], &sum.TimeZone)
		_ = dc.FromPayload(memo[memoCreateTime], &sum.CreateTime)
		list.Items = append(list.Items, sum)
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	sched := s.readSchedule(w, r)
	if sched == nil {
		return
	}
	if sched.Metadata.Workspace != ws || sched.Metadata.Name != name {
		writeSpecError(w, schemas.ErrorList{schemas.Invalid(schemas.NewPath("metadata"),
			"must name schedule %s of workspace %s, as the path does", name, ws)})
		return
	}
	var view workflows.ScheduleView
	if !s.scheduleUpdate(w, r, workflows.UpdateScheduleSpec, workflows.UpdateScheduleRequest{Schedule: *sched}, &view) {
		return
	}
	writeJSON(w, http.StatusOK, api.ScheduleView{Spec: view.Schedule, Status: view.Status})
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbWrite) {
		return
	}
	var req api.PauseScheduleRequest
	if !decodeJSON(w, r, &req, 64<<10, true) {
		return
	}
	var view workflows.ScheduleView
	if s.scheduleUpdate(w, r, workflows.UpdateSchedulePause, workflows.PauseScheduleRequest{Note: req.Note}, &view) {
		writeJSON(w, http.StatusOK, api.ScheduleView{Spec: view.Schedule, Status: view.Status})
	}
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbWrite) {
		return
	}
	var view workflows.ScheduleView
	if s.scheduleUpdate(w, r, workflows.UpdateScheduleResume, workflows.ResumeScheduleRequest{}, &view) {
		writeJSON(w, http.StatusOK, api.ScheduleView{Spec: view.Schedule, Status: view.Status})
	}
}

func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbWrite) {
		return
	}
	var req api.TriggerScheduleRequest
	if !decodeJSON(w, r, &req, 64<<10, true) {
		return
	}
	var res workflows.TriggerScheduleResult
	if s.scheduleUpdate(w, r, workflows.UpdateScheduleTrigger, workflows.TriggerScheduleRequest{OverlapPolicy: req.OverlapPolicy}, &res) {
		writeJSON(w, http.StatusOK, api.TriggerScheduleResult{Run: res.Run})
	}
}

func (s *Server) backfillSchedule(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbWrite) {
		return
	}
	var req api.BackfillScheduleRequest
	if !decodeJSON(w, r, &req, 64<<10, false) {
		return
	}
	var res workflows.BackfillScheduleResult
	if s.scheduleUpdate(w, r, workflows.UpdateScheduleBackfill, workflows.BackfillScheduleRequest{
		From: req.From, To: req.To, OverlapPolicy: req.OverlapPolicy}, &res) {
		if res.Runs == nil {
			res.Runs = []schemas.ScheduleRun{}
		}
		writeJSON(w, http.StatusOK, api.BackfillScheduleResult{Runs: res.Runs})
	}
}

// scheduleUpdate sends an update to a schedule and waits for its result; on failure it
// has written the error response: 404 for an unknown schedule, 400 when the workflow's
// validator refused the request.
func (s *Server) scheduleUpdate(w http.ResponseWriter, r *http.Request, update string, arg, result any) bool {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	h, err := s.tc.UpdateWorkflow(r.Context(), client.UpdateWorkflowOptions{
		WorkflowID:   workflows.ScheduleWorkflowID(ws, name),
		UpdateName:   update,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(r.Context(), result)
	}
	if err != nil {
		s.scheduleError(w, ws, name, update+" schedule", err)
		return false
	}
	return true
}

// scheduleError answers a Temporal error about a schedule.
func (s *Server) scheduleError(w http.ResponseWriter, ws, name, what string, err error) {
	var appErr *temporal.ApplicationError
	switch {
	case isNotFound(err):
		writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
			Message: fmt.Sprintf("schedule %s not found in workspace %s", name, ws)})
	case errors.As(err, &appErr):
		writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: appErr.Message()})
	default:
		s.internal(w, what, err)
	}
}

// deleteSchedule terminates a schedule's workflow and deletes every run of it (earlier
// runs continued as new), then answers once they are gone. Jobs the schedule started
// are not touched.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	id := workflows.ScheduleWorkflowID(ws, name)
	desc, err := s.tc.DescribeWorkflowExecution(r.Context(), id, "")
	if err != nil {
		s.scheduleError(w, ws, name, "describe schedule", err)
		return
	}
	if err := s.tc.TerminateWorkflow(r.Context(), id, "", "schedule deleted"); err != nil && !isNotFound(err) {
		s.internal(w, "terminate schedule", err)
		return
	}
	_, err = s.tc.WorkflowService().DeleteWorkflowExecution(r.Context(), &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: s.opts.Namespace, WorkflowExecution: desc.GetWorkflowExecutionInfo().GetExecution(),
	})
	if err == nil || isNotFound(err) {
		err = s.deleteRuns(r.Context(), id)
	}
	if err != nil {
		s.internal(w, "delete schedule", err)
		return
	}
	if err := s.waitDeleted(r.Context(), id); err != nil {
		s.internal(w, "delete schedule", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteRuns deletes every execution with a workflow id.
func (s *Server) deleteRuns(ctx context.Context, id string) error {
	var token []byte
	for {
		resp, err := s.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.opts.Namespace, PageSize: 100, NextPageToken: token,
			Query: fmt.Sprintf("WorkflowId = %q", id),
		})
		if err != nil {
			return err
		}
		for _, e := range resp.Executions {
			_, err := s.tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
				Namespace: s.opts.Namespace, WorkflowExecution: e.GetExecution(),
			})
			if err != nil && !isNotFound(err) {
				return err
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return nil
		}
	}
}
