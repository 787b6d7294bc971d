package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// triggerRoutes are the Trigger operations (registered in kinds.go); without a trigger
// store they answer 503 (triggersFeature).
var triggerRoutes = []route{
	{method: "POST", path: "/v1/triggers", handler: (*Server).applyTrigger, verb: auth.VerbWrite, ws: wsBody, feature: triggersFeature, object: "trigger",
		id: "applyTrigger", tag: "triggers", summary: "Create or replace a trigger in the trigger's workspace",
		request:   &payload{v: schemas.Trigger{}, media: specMedia},
		responses: []reply{{200, "the trigger", jsonBody(schemas.Trigger{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers", handler: (*Server).listTriggers, verb: auth.VerbRead, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "listTriggers", tag: "triggers", summary: "A workspace's triggers",
		responses: []reply{{200, "the triggers", jsonBody(api.TriggerList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).getTrigger, verb: auth.VerbRead, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "getTrigger", tag: "triggers", summary: "A trigger",
		responses: []reply{{200, "the trigger", jsonBody(schemas.Trigger{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).deleteTrigger, verb: auth.VerbWrite, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "deleteTrigger", tag: "triggers", summary: "Delete a trigger; what it started keeps running",
		responses: []reply{{204, "deleted", nil}}},
}

func (s *Server) applyTrigger(r *http.Request) (any, error) {
	t, err := readDoc(s, r, schemas.DecodeTrigger)
	if err != nil {
		return nil, err
	}
	if err := s.inWorkspace(r, t.Metadata.Workspace, "trigger "+t.Metadata.Workspace+"/"+t.Metadata.Name); err != nil {
		return nil, err
	}
	return s.svc.Triggers.Apply(r.Context(), t)
}

func (s *Server) getTrigger(r *http.Request) (any, error) {
	return s.svc.Triggers.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) listTriggers(r *http.Request) (any, error) {
	list, err := s.svc.Triggers.List(r.Context(), r.PathValue("ws"))
	if err != nil {
		return nil, err
	}
	out := api.TriggerList{Items: []schemas.Trigger{}}
	for _, t := range list {
		out.Items = append(out.Items, *t)
	}
	return out, nil
}

func (s *Server) deleteTrigger(r *http.Request) (any, error) {
	return nil, s.svc.Triggers.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
