package server

import (
	"context"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// templateRoutes are the stored PipelineTemplate operations (registered in kinds.go);
// without a template store they answer 503 (templatesFeature).
var templateRoutes = []route{
	{method: "POST", path: "/v1/templates", handler: (*Server).applyTemplate, verb: auth.VerbWrite, ws: wsBody, feature: templatesFeature, object: "pipeline template",
		id: "applyTemplate", tag: "pipelines", summary: "Create or replace a stored pipeline template in its workspace",
		request:   &payload{v: schemas.StoredPipelineTemplate{}, media: specMedia},
		responses: []reply{{200, "the template", jsonBody(schemas.StoredPipelineTemplate{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/templates", handler: (*Server).listTemplates, verb: auth.VerbRead, ws: wsPath, feature: templatesFeature, object: "pipeline template",
		id: "listTemplates", tag: "pipelines", summary: "A workspace's stored pipeline templates",
		responses: []reply{{200, "the templates", jsonBody(api.PipelineTemplateList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/templates/{name}", handler: (*Server).getTemplate, verb: auth.VerbRead, ws: wsPath, feature: templatesFeature, object: "pipeline template",
		id: "getTemplate", tag: "pipelines", summary: "A stored pipeline template",
		responses: []reply{{200, "the template", jsonBody(schemas.StoredPipelineTemplate{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/templates/{name}/run", handler: (*Server).runTemplate, verb: auth.VerbWrite, ws: wsPath, feature: templatesFeature, object: "pipeline template",
		id: "runTemplate", tag: "pipelines", summary: "Start a pipeline run, named in the body, of a stored template's spec as it is now",
		request:   &payload{v: api.TemplateRunRequest{}, media: jsonMedia},
		responses: []reply{{201, "the run, Pending", jsonBody(api.PipelineRun{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/templates/{name}", handler: (*Server).deleteTemplate, verb: auth.VerbWrite, ws: wsPath, feature: templatesFeature, object: "pipeline template",
		id: "deleteTemplate", tag: "pipelines", summary: "Delete a stored pipeline template; its runs are not changed",
		responses: []reply{{204, "deleted", nil}}},
}

// templatesFeature answers 503 when the service serves no templates
// (service.Config.Templates).
var templatesFeature = &feature{on: func(s *Server) bool { return s.svc.Templates != nil },
	off: "this server does not serve pipeline templates: it was started without a template store"}

func (s *Server) applyTemplate(r *http.Request) (any, error) {
	t, err := readDoc(s, r, schemas.DecodePipelineTemplate)
	if err != nil {
		return nil, err
	}
	if err := s.inWorkspace(r, t.Metadata.Workspace, "pipeline template "+t.Metadata.Workspace+"/"+t.Metadata.Name); err != nil {
		return nil, err
	}
	return s.svc.Templates.Apply(r.Context(), t)
}

func (s *Server) getTemplate(r *http.Request) (any, error) {
	return s.svc.Templates.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) listTemplates(r *http.Request) (any, error) {
	list, err := s.svc.Templates.List(r.Context(), r.PathValue("ws"))
	if err != nil {
		return nil, err
	}
	out := api.PipelineTemplateList{Items: []schemas.StoredPipelineTemplate{}}
	for _, t := range list {
		out.Items = append(out.Items, *t)
	}
	return out, nil
}

func (s *Server) runTemplate(r *http.Request) (any, error) {
	return actOn(r, false, func(ctx context.Context, ws, name string, req api.TemplateRunRequest) (api.PipelineRun, error) {
		return s.svc.Templates.Run(ctx, ws, name, req.Name, req.Params)
	})
}

func (s *Server) deleteTemplate(r *http.Request) (any, error) {
	return nil, s.svc.Templates.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
