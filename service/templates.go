package service

import (
	"context"
	"fmt"
	"maps"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// TemplateStore is the store of pipeline templates (templates.Store).
type TemplateStore = sentinelStore[*schemas.StoredPipelineTemplate]

// PipelineTemplates is the stored PipelineTemplate service: apply, get, list, delete,
// and run (a Pipeline run of the template's spec as it is now).
type PipelineTemplates struct {
	*Documents[*schemas.StoredPipelineTemplate]
	pipelines *Pipelines
}

// NewPipelineTemplates is the template service over store, starting runs through
// pipelines.
func NewPipelineTemplates(store TemplateStore, pipelines *Pipelines) *PipelineTemplates {
	notFound, invalidName := store.Sentinels()
	return &PipelineTemplates{
		Documents: &Documents[*schemas.StoredPipelineTemplate]{store: store, object: "pipeline template", noun: "pipeline template",
			missing: []error{notFound, invalidName}, badList: invalidName},
		pipelines: pipelines,
	}
}

// Run starts a run named run of template name of workspace ws with the given
// parameter values (the template's defaults fill in the others). The template is
// resolved now: the run's spec is the template's, annotated with its name
// (schemas.AnnotationPipelineTemplate), and no later change of the template changes
// it. A template of another workspace is not found.
func (t *PipelineTemplates) Run(ctx context.Context, ws, name, run string, given map[string]string) (api.PipelineRun, error) {
	return t.RunLabelled(ctx, ws, name, run, nil, given)
}

// RunLabelled is Run with labels added to the template's on the run (a trigger's).
func (t *PipelineTemplates) RunLabelled(ctx context.Context, ws, name, run string, labels, given map[string]string) (api.PipelineRun, error) {
	tpl, err := t.Get(ctx, ws, name)
	if err != nil {
		return api.PipelineRun{}, err
	}
	if run == "" {
		return api.PipelineRun{}, invalid("a run of a pipeline template needs a name", "name", "required: the run's name")
	}
	p := tpl.Run(run)
	if len(labels) > 0 && p.Metadata.Labels == nil {
		p.Metadata.Labels = map[string]string{}
	}
	maps.Copy(p.Metadata.Labels, labels)
	if errs := p.Validate(); len(errs) > 0 {
		return api.PipelineRun{}, &Error{Kind: ErrInvalidObject,
			Message: fmt.Sprintf("run %s of pipeline template %s: %d problem(s)", run, name, len(errs)), Fields: fieldsOf(errs, "name")}
	}
	values, errs := p.Spec.ResolveParams(given)
	if len(errs) > 0 {
		return api.PipelineRun{}, &Error{Kind: ErrInvalid,
			Message: fmt.Sprintf("run %s of pipeline template %s: %d problem(s)", run, name, len(errs)), Fields: fieldsOf(errs, "name")}
	}
	return t.pipelines.Start(ctx, &p, values)
}
