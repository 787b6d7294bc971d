package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// An experiment's trials are a resource of their own: listed, and read one by one.
func init() {
	pathChecks["trial"] = intBetween(0, 1<<30)
	paramDocs["trial"] = "the trial's ID (trials are numbered from 0 in the order they were suggested)"
	routes = append(routes, trialRoutes...)
}

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
