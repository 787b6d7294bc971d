package schemas

import "github.com/invopop/jsonschema"

// KindPipelineTemplate is the kind of a stored PipelineTemplate document.
const KindPipelineTemplate Kind = "PipelineTemplate"

// AnnotationPipelineTemplate is set on a run started from a stored PipelineTemplate:
// the template's name. The run's spec is the template's as it was when the run started.
const AnnotationPipelineTemplate = "opendlc.io/pipeline-template"

// StoredPipelineTemplate is a Pipeline kept under a name in its workspace, to be run
// by name (dlc template run NAME, POST .../templates/{name}/run) rather than
// submitted whole each time. Each run is a Pipeline named as the caller says, with the
// template's labels and spec (resolved when the run starts: the run records the spec
// it ran, and a later change of the template changes no run).
type StoredPipelineTemplate struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be PipelineTemplate.
	Kind Kind `json:"kind"`
	// Metadata names the template and its workspace; its labels are copied to every
	// run, and through the run to its jobs.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the pipeline each run runs: parameters, steps and onExit steps.
	Spec PipelineSpec `json:"spec"`
}

var _ Object = (*StoredPipelineTemplate)(nil)

// GetKind returns KindPipelineTemplate.
func (t *StoredPipelineTemplate) GetKind() Kind { return KindPipelineTemplate }

// GetMeta returns the template's metadata.
func (t *StoredPipelineTemplate) GetMeta() *ObjectMeta { return &t.Metadata }

// Default fills in the workspace.
func (t *StoredPipelineTemplate) Default() {
	if t.Metadata.Workspace == "" {
		t.Metadata.Workspace = DefaultWorkspace
	}
}

// Validate returns every problem with the template, sorted by field path, or nil: the
// checks of a Pipeline, except those on names that depend on a run's name.
func (t *StoredPipelineTemplate) Validate() ErrorList {
	var errs ErrorList
	validateHeader(t, t.APIVersion, t.Kind, &errs)
	if len(t.Metadata.Labels) > maxMapEntries-2 {
		errs = append(errs, Invalid(NewPath("metadata", "labels"),
			"must have at most %d entries: each step's job also gets %s and %s", maxMapEntries-2, LabelPipeline, LabelPipelineStep))
	}
	t.Spec.validate(0, NewPath("spec"), &errs)
	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// Run is the Pipeline that a run of the template named name runs: the template's
// labels and spec, annotated with the template's name.
func (t *StoredPipelineTemplate) Run(name string) Pipeline {
	meta := ObjectMeta{Name: name, Workspace: t.Metadata.Workspace,
		Annotations: map[string]string{AnnotationPipelineTemplate: t.Metadata.Name}}
	if len(t.Metadata.Labels) > 0 {
		meta.Labels = make(map[string]string, len(t.Metadata.Labels))
		for _, k := range sortedKeys(t.Metadata.Labels) {
			meta.Labels[k] = t.Metadata.Labels[k]
		}
	}
	return Pipeline{APIVersion: APIVersion, Kind: KindPipeline, Metadata: meta, Spec: t.Spec}
}

// JSONSchemaExtend pins apiVersion and kind.
func (StoredPipelineTemplate) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindPipelineTemplate)
}

// DecodePipelineTemplate is Decode for a document that must be a PipelineTemplate.
func DecodePipelineTemplate(data []byte) (*StoredPipelineTemplate, error) {
	return decodeAs[StoredPipelineTemplate](data, KindPipelineTemplate)
}

// PipelineTemplateRef names a stored PipelineTemplate of the referring object's
// workspace (a trigger's action).
type PipelineTemplateRef struct {
	// Name is the template's name.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
}

// validate checks the name.
func (r *PipelineTemplateRef) validate(p Path, errs *ErrorList) {
	if len(r.Name) > maxQualifiedNameLen || !dnsLabelRE.MatchString(r.Name) {
		*errs = append(*errs, Invalid(p.Child("name"), "must be the name of a PipelineTemplate (a DNS label)"))
	}
}
