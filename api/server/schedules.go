package server

import (
	"net/http"
	"strconv"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// scheduleRoutes are the Schedule operations (registered in kinds.go).
var scheduleRoutes = []route{
	{method: "POST", path: "/v1/schedules", handler: (*Server).createSchedule, verb: auth.VerbWrite, ws: wsBody, object: "schedule",
		id: "createSchedule", tag: "schedules", summary: "Validate and create a schedule in the spec's workspace",
		request:   &payload{v: schemas.Schedule{}, media: specMedia},
		responses: []reply{{201, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/schedules", handler: (*Server).listSchedules, verb: auth.VerbRead, ws: wsPath, object: "schedule",
		id: "listSchedules", tag: "schedules", summary: "List a workspace's schedules",
		query:     listQuery(),
		responses: []reply{{200, "a page of schedules", jsonBody(api.ScheduleList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).getSchedule, verb: auth.VerbRead, ws: wsPath, object: "schedule",
		id: "getSchedule", tag: "schedules", summary: "A schedule's spec, next fire times, running runs and history",
		query:     []param{{name: "next", typ: "integer", desc: "how many next fire times, 1 to 100; default 5"}},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "PUT", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).updateSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "updateSchedule", tag: "schedules", summary: "Replace a schedule's spec; the next fire time follows at once",
		request:   &payload{v: schemas.Schedule{}, media: specMedia},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/pause", handler: (*Server).pauseSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "pauseSchedule", tag: "schedules", summary: "Pause scheduled runs; times that pass while paused are not caught up",
		request:   &payload{v: api.PauseScheduleRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/resume", handler: (*Server).resumeSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "resumeSchedule", tag: "schedules", summary: "Resume scheduled runs",
		responses: []reply{{200, "the schedule", jsonBody(api.ScheduleView{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/trigger", handler: (*Server).triggerSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "triggerSchedule", tag: "schedules", summary: "Run the schedule's action now",
		request:   &payload{v: api.TriggerScheduleRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the run", jsonBody(api.TriggerScheduleResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/schedules/{name}/backfill", handler: (*Server).backfillSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "backfillSchedule", tag: "schedules", summary: "Run every time of [from, to) the schedule names, once each",
		request:   jsonBody(api.BackfillScheduleRequest{}),
		responses: []reply{{200, "the backfill's runs", jsonBody(api.BackfillScheduleResult{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/schedules/{name}", handler: (*Server).deleteSchedule, verb: auth.VerbWrite, ws: wsPath, object: "schedule",
		id: "deleteSchedule", tag: "schedules", summary: "Delete a schedule; jobs it started are left alone",
		responses: []reply{{204, "deleted", nil}}},
}

// readSchedule reads, decodes, validates and checks a schedule document.
func (s *Server) readSchedule(r *http.Request) (*schemas.Schedule, error) {
	return readDoc(s, r, schemas.DecodeSchedule)
}

func (s *Server) createSchedule(r *http.Request) (any, error) {
	sched, err := s.readSchedule(r)
	if err != nil {
		return nil, err
	}
	ws, name := sched.Metadata.Workspace, sched.Metadata.Name
	if err := s.inWorkspace(r, ws, "schedule "+ws+"/"+name); err != nil {
		return nil, err
	}
	return s.svc.Schedules.Create(r.Context(), sched)
}

func (s *Server) getSchedule(r *http.Request) (any, error) {
	next := 5
	if v := r.URL.Query().Get("next"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, badRequest("invalid next", "next", "must be an integer between 1 and 100")
		}
		next = n
	}
	return s.svc.Schedules.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"), next)
}

func (s *Server) listSchedules(r *http.Request) (any, error) {
	return listIn(r, s.svc.Schedules.List)
}

func (s *Server) updateSchedule(r *http.Request) (any, error) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	sched, err := s.readSchedule(r)
	if err != nil {
		return nil, err
	}
	if sched.Metadata.Workspace != ws || sched.Metadata.Name != name {
		return nil, specError(schemas.ErrorList{schemas.Invalid(schemas.NewPath("metadata"),
			"must name schedule %s of workspace %s, as the path does", name, ws)})
	}
	return s.svc.Schedules.Replace(r.Context(), sched)
}

func (s *Server) pauseSchedule(r *http.Request) (any, error) {
	var req api.PauseScheduleRequest
	if err := decodeJSON(r, &req, smallBodyLimit, optionalBody); err != nil {
		return nil, err
	}
	return s.svc.Schedules.Pause(r.Context(), r.PathValue("ws"), r.PathValue("name"), req)
}

func (s *Server) resumeSchedule(r *http.Request) (any, error) {
	return s.svc.Schedules.Resume(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) triggerSchedule(r *http.Request) (any, error) {
	var req api.TriggerScheduleRequest
	if err := decodeJSON(r, &req, smallBodyLimit, optionalBody); err != nil {
		return nil, err
	}
	return s.svc.Schedules.Trigger(r.Context(), r.PathValue("ws"), r.PathValue("name"), req)
}

func (s *Server) backfillSchedule(r *http.Request) (any, error) {
	var req api.BackfillScheduleRequest
	if err := decodeJSON(r, &req, smallBodyLimit, requiredBody); err != nil {
		return nil, err
	}
	return s.svc.Schedules.Backfill(r.Context(), r.PathValue("ws"), r.PathValue("name"), req)
}

// deleteSchedule deletes a schedule (every run of its workflow) and answers once it is
// gone. What the schedule started is not touched.
func (s *Server) deleteSchedule(r *http.Request) (any, error) {
	return nil, s.svc.Schedules.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
