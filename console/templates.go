package console

import (
	"context"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// sampleTemplate starts the pipeline templates' apply form.
const sampleTemplate = `apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: nightly, workspace: %s}
spec:
  params: [{name: note, default: "from %s"}]
  steps:
    - name: hello
      job:
        framework: custom
        command: [sh, -c, 'echo "$0"', "${params.note}"]
        roles: {worker: {replicas: 1}}
`

// templatesData is the pipeline templates' list page's.
type templatesData struct {
	Templates []schemas.StoredPipelineTemplate
	Form      docForm
}

// templatePages are the stored pipeline templates' list, apply and delete pages.
var templatePages = &docPages[schemas.StoredPipelineTemplate]{
	dir: "templates", kind: "PipelineTemplate", id: "template", title: "Pipeline templates", sample: sampleTemplate,
	list: func(c *client.Client, ctx context.Context, ws string) ([]schemas.StoredPipelineTemplate, error) {
		l, err := c.ListPipelineTemplates(ctx, ws)
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	},
	apply: (*client.Client).ApplyPipelineTemplate,
	del:   (*client.Client).DeletePipelineTemplate,
	name:  func(t schemas.StoredPipelineTemplate) string { return t.Metadata.Name },
	data: func(ts []schemas.StoredPipelineTemplate, f docForm) any {
		return templatesData{Templates: ts, Form: f}
	},
}

// templatePage shows one stored pipeline template and its document.
func (c *Console) templatePage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	t, err := k.api.GetPipelineTemplate(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	spec, err := yaml.Marshal(t)
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "template", "", k.page("Pipeline template "+name, "templates", struct {
		Template *schemas.StoredPipelineTemplate
		SpecYAML string
	}{t, string(spec)}))
}
