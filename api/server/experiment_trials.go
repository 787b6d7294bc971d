package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// trialRoutes are an experiment's trials, a resource of their own: listed, and read
// one by one. They are the Experiment kind's routes too (kinds.go).
var trialRoutes = []route{
	{method: "GET", path: "/v1/workspaces/{ws}/experiments/{name}/trials", handler: (*Server).listTrials, verb: auth.VerbRead, ws: wsPath, object: "experiment",
		id: "listTrials", tag: "experiments", summary: "An experiment's trials, by ID: parameters, phase, objective, reports",
		query:     []param{{name: "phase", typ: "string", desc: "only trials in this phase (Running, Completed, Pruned, Failed...)"}},
		responses: []reply{{200, "the trials", jsonBody(api.TrialList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/experiments/{name}/trials/{trial}", handler: (*Server).getTrial, verb: auth.VerbRead, ws: wsPath, object: "experiment",
		id: "getTrial", tag: "experiments", summary: "One trial of an experiment",
		responses: []reply{{200, "the trial", jsonBody(schemas.TrialStatus{})}}},
}

func (s *Server) listTrials(r *http.Request) (any, error) {
	return s.svc.Experiments.Trials(r.Context(), r.PathValue("ws"), r.PathValue("name"), r.URL.Query().Get("phase"))
}

func (s *Server) getTrial(r *http.Request) (any, error) {
	return s.svc.Experiments.Trial(r.Context(), r.PathValue("ws"), r.PathValue("name"), r.PathValue("trial"))
}
