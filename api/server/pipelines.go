package server

import (
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
)

// WithTriggers serves triggers from store. Default none: the trigger routes answer 503.
func WithTriggers(store *triggers.Store) Option { return func(o *Options) { o.Triggers = store } }

// triggersOff is the answer of the trigger routes when the server has no trigger
// store: 503.
func (s *Server) triggersOff() error {
	if s.opts.Triggers != nil {
		return nil
	}
	return unavailable("this server does not serve triggers: it was started without a trigger store")
}

func (s *Server) runPipeline(r *http.Request) (any, error) {
	p, err := readDoc(s, r, schemas.DecodePipeline, func(p *schemas.Pipeline) error {
		return supportedSteps(&p.Spec, schemas.NewPath("spec"))
	})
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

// supportedSteps checks that every job step's framework is one this server runs.
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

func (s *Server) applyTrigger(r *http.Request) (any, error) {
	if err := s.triggersOff(); err != nil {
		return nil, err
	}
	t, err := readDoc(s, r, schemas.DecodeTrigger, triggerSupported)
	if err != nil {
		return nil, err
	}
	if err := s.inWorkspace(r, t.Metadata.Workspace, "trigger "+t.Metadata.Workspace+"/"+t.Metadata.Name); err != nil {
		return nil, err
	}
	return s.svc.Triggers.Apply(r.Context(), t)
}

// triggerSupported checks that the frameworks a trigger's action names run on this server.
func triggerSupported(t *schemas.Trigger) error {
	switch a := t.Spec.Action; {
	case a.Pipeline != nil:
		return supportedSteps(a.Pipeline, schemas.NewPath("spec", "action", "pipeline"))
	case a.Job != nil:
		if _, err := frameworks.Get(a.Job.Framework); err != nil {
			return schemas.ErrorList{schemas.NotSupported(schemas.NewPath("spec", "action", "job", "framework"), frameworks.Supported())}
		}
	}
	return nil
}

func (s *Server) getTrigger(r *http.Request) (any, error) {
	if err := s.triggersOff(); err != nil {
		return nil, err
	}
	return s.svc.Triggers.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}

func (s *Server) listTriggers(r *http.Request) (any, error) {
	if err := s.triggersOff(); err != nil {
		return nil, err
	}
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
	if err := s.triggersOff(); err != nil {
		return nil, err
	}
	return nil, s.svc.Triggers.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
