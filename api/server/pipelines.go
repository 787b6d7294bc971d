package server

import (
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// pipelineRoutes are the Pipeline operations (registered in kinds.go).
var pipelineRoutes = []route{
	{method: "POST", path: "/v1/pipelines", handler: (*Server).runPipeline, verb: auth.VerbWrite, ws: wsBody, object: "pipeline",
		id: "runPipeline", tag: "pipelines", summary: "Validate a pipeline and start a run of it, named metadata.name, in its workspace",
		query:     []param{{name: "param", typ: "string", repeat: true, desc: "NAME=VALUE: a parameter of the pipeline; repeatable"}},
		request:   &payload{v: schemas.Pipeline{}, media: specMedia},
		responses: []reply{{201, "the run, Pending", jsonBody(api.PipelineRun{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/pipelines", handler: (*Server).listPipelines, verb: auth.VerbRead, ws: wsPath, object: "pipeline",
		id: "listPipelines", tag: "pipelines", summary: "List a workspace's pipeline runs, newest first",
		query:     listQuery(param{name: "phase", typ: "string", desc: "only runs in this phase"}, labelParam),
		responses: []reply{{200, "a page of runs", jsonBody(api.PipelineList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/pipelines/{name}", handler: (*Server).getPipeline, verb: auth.VerbRead, ws: wsPath, object: "pipeline",
		id: "getPipeline", tag: "pipelines", summary: "A pipeline run: the pipeline and the live status of every step",
		responses: []reply{{200, "the run", jsonBody(api.PipelineRun{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/pipelines/{name}/stop", handler: (*Server).stopPipeline, verb: auth.VerbWrite, ws: wsPath, object: "pipeline",
		id: "stopPipeline", tag: "pipelines", summary: "Stop a pipeline run: its jobs are stopped; answers once it is terminal",
		request:   &payload{v: api.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the final phase", jsonBody(api.PipelineStopResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/pipelines/{name}/retry", handler: (*Server).retryPipeline, verb: auth.VerbWrite, ws: wsPath, object: "pipeline",
		id: "retryPipeline", tag: "pipelines", summary: "Start a retry of a Failed or Stopped run: a new run, <run>-retry-<N> unless named, that reuses the outputs of the steps that succeeded and runs the others",
		request:   &payload{v: api.PipelineRetryRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{201, "the new run, Pending", jsonBody(api.PipelineRun{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/pipelines/{name}", handler: (*Server).deletePipeline, verb: auth.VerbWrite, ws: wsPath, object: "pipeline",
		id: "deletePipeline", tag: "pipelines", summary: "Stop a pipeline run if it runs, then delete it and its step jobs; its name can be used again",
		responses: []reply{{204, "deleted", nil}}},
}

func (s *Server) runPipeline(r *http.Request) (any, error) {
	p, err := readDoc(s, r, schemas.DecodePipeline)
	if err != nil {
		return nil, err
	}
	given := map[string]string{}
	for _, kv := range r.URL.Query()["param"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badRequest("invalid param", "param", "must be NAME=VALUE")
		}
		given[k] = v
	}
	values, errs := p.Spec.ResolveParams(given)
	if len(errs) > 0 {
		return nil, specError(errs)
	}
	ws, name := p.Metadata.Workspace, p.Metadata.Name
	if err := s.inWorkspace(r, ws, "pipeline "+ws+"/"+name); err != nil {
		return nil, err
	}
	return s.svc.Pipelines.Start(r.Context(), p, values)
}

func (s *Server) getPipeline(r *http.Request) (any, error) {
	return s.svc.Pipelines.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) listPipelines(r *http.Request) (any, error) {
	return listIn(r, s.svc.Pipelines.List)
}

func (s *Server) stopPipeline(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Pipelines.Stop)
}

// deletePipeline deletes a pipeline run and its step jobs; its name can then be used
// again.
func (s *Server) deletePipeline(r *http.Request) (any, error) {
	return nil, s.svc.Pipelines.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

// retryPipeline starts a retry of a Failed or Stopped run.
func (s *Server) retryPipeline(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Pipelines.Retry)
}
