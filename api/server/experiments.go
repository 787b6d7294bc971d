package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// experimentRoutes are the Experiment operations (registered in kinds.go, with
// trialRoutes).
var experimentRoutes = []route{
	{method: "POST", path: "/v1/experiments", handler: (*Server).createExperiment, verb: auth.VerbWrite, ws: wsBody, object: "experiment",
		id: "createExperiment", tag: "experiments", summary: "Validate and start an HPO experiment in the spec's workspace",
		request:   &payload{v: schemas.Experiment{}, media: specMedia},
		responses: []reply{{201, "the experiment, Pending", jsonBody(api.ExperimentDetail{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/experiments", handler: (*Server).listExperiments, verb: auth.VerbRead, ws: wsPath, object: "experiment",
		id: "listExperiments", tag: "experiments", summary: "List a workspace's experiments, newest first",
		query:     listQuery(param{name: "phase", typ: "string", desc: "only experiments in this phase"}, labelParam),
		responses: []reply{{200, "a page of experiments", jsonBody(api.ExperimentList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/experiments/{name}", handler: (*Server).getExperiment, verb: auth.VerbRead, ws: wsPath, object: "experiment",
		id: "getExperiment", tag: "experiments", summary: "An experiment's spec and live status: every trial, the best",
		responses: []reply{{200, "the experiment", jsonBody(api.ExperimentDetail{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/stop", handler: (*Server).stopExperiment, verb: auth.VerbWrite, ws: wsPath, object: "experiment",
		id: "stopExperiment", tag: "experiments", summary: "Stop an experiment's running trials; answers once it is Stopped (resume carries on)",
		request:   &payload{v: api.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the phase", jsonBody(api.ExperimentActionResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/resume", handler: (*Server).resumeExperiment, verb: auth.VerbWrite, ws: wsPath, object: "experiment",
		id: "resumeExperiment", tag: "experiments", summary: "Resume a Stopped experiment: its stopped trials run again, then new ones",
		request:   &payload{v: api.ResumeRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the phase", jsonBody(api.ExperimentActionResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/extend", handler: (*Server).extendExperiment, verb: auth.VerbWrite, ws: wsPath, object: "experiment",
		id: "extendExperiment", tag: "experiments", summary: "Raise an experiment's maxTrials",
		request:   jsonBody(api.ExtendRequest{}),
		responses: []reply{{200, "the phase and the new limit", jsonBody(api.ExperimentActionResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/experiments/{name}/enqueue", handler: (*Server).enqueueExperiment, verb: auth.VerbWrite, ws: wsPath, object: "experiment",
		id: "enqueueTrials", tag: "experiments", summary: "Run these parameter sets as the experiment's next trials, before the algorithm's suggestions",
		request:   jsonBody(api.EnqueueRequest{}),
		responses: []reply{{200, "the phase and the trial limit", jsonBody(api.ExperimentActionResult{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/experiments/{name}", handler: (*Server).deleteExperiment, verb: auth.VerbWrite, ws: wsPath, object: "experiment",
		id: "deleteExperiment", tag: "experiments", summary: "Stop an experiment if it runs, then delete it and its trial jobs; its name can be used again",
		responses: []reply{{204, "deleted", nil}}},
}

func (s *Server) createExperiment(r *http.Request) (any, error) {
	exp, err := readDoc(s, r, schemas.DecodeExperiment)
	if err != nil {
		return nil, err
	}
	ws, name := exp.Metadata.Workspace, exp.Metadata.Name
	if err := s.inWorkspace(r, ws, "experiment "+ws+"/"+name); err != nil {
		return nil, err
	}
	return s.svc.Experiments.Start(r.Context(), exp)
}

func (s *Server) getExperiment(r *http.Request) (any, error) {
	return s.svc.Experiments.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) listExperiments(r *http.Request) (any, error) {
	return listIn(r, s.svc.Experiments.List)
}

func (s *Server) stopExperiment(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Experiments.Stop)
}

func (s *Server) resumeExperiment(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Experiments.Resume)
}

func (s *Server) enqueueExperiment(r *http.Request) (any, error) {
	return actOn(r, requiredBody, s.svc.Experiments.Enqueue)
}

func (s *Server) extendExperiment(r *http.Request) (any, error) {
	return actOn(r, requiredBody, s.svc.Experiments.Extend)
}

// deleteExperiment deletes an experiment and its trial jobs; its name can then be
// used again.
func (s *Server) deleteExperiment(r *http.Request) (any, error) {
	return nil, s.svc.Experiments.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
