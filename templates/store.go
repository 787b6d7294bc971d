// Package templates keeps stored PipelineTemplates (schemas.StoredPipelineTemplate)
// in the JetStream key-value bucket DLC_PIPELINE_TEMPLATES, keyed
// "<workspace>.<name>", validated on the way in and on the way out, like triggers and
// notification rules. A run of a template is an ordinary Pipeline run whose spec is
// the template's at the time the run started (docs/pipelines.md, "Templates").
package templates

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/kvdocs"
	"github.com/opendlc/opendlc/schemas"
)

// Bucket is the key-value bucket of every workspace's pipeline templates.
const Bucket = dlcjs.PipelineTemplatesBucket

var (
	// ErrNotFound is the error for a template that is not in its workspace.
	ErrNotFound = errors.New("templates: pipeline template not found")
	// ErrInvalidName is the error for a workspace or template name that is not a DNS
	// label.
	ErrInvalidName = errors.New("templates: invalid name")
)

// Store keeps PipelineTemplates (Put, Get, List, Delete). Deleting a template changes
// none of the runs started from it.
type Store struct {
	*kvdocs.Store[*schemas.StoredPipelineTemplate]
}

// templateKind describes templates to kvdocs.
var templateKind = kvdocs.Kind[*schemas.StoredPipelineTemplate]{
	Pkg: "templates", Noun: "pipeline template",
	Decode: schemas.DecodePipelineTemplate,
	Prepare: kvdocs.Prepare(schemas.KindPipelineTemplate, func(t *schemas.StoredPipelineTemplate) (*string, *schemas.Kind) {
		return &t.APIVersion, &t.Kind
	}),
	Validate:    func(t *schemas.StoredPipelineTemplate) schemas.ErrorList { return t.Validate() },
	Meta:        func(t *schemas.StoredPipelineTemplate) (string, string) { return t.Metadata.Workspace, t.Metadata.Name },
	NotFound:    ErrNotFound,
	InvalidName: ErrInvalidName,
}

// OpenStore opens the templates bucket, which events/jetstream.EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	s, err := kvdocs.Open(ctx, js, Bucket, templateKind)
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}
