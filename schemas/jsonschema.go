package schemas

import (
	"github.com/invopop/jsonschema"
)

// The JSONSchemaExtend methods add to the generated JSON Schema what struct tags cannot
// say (constants, map bounds), from the same constants Validate uses.

// Patterns of Kubernetes-style map keys and label values, for the JSON Schema only.
const (
	qualifiedKeyPattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	labelValuePattern   = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
)

func uint64p(n uint64) *uint64 { return new(n) }

// labelMapSchema constrains a map with Kubernetes label syntax.
func labelMapSchema(s *jsonschema.Schema, valueMaxLength uint64, valuePattern string) {
	if s == nil {
		return
	}
	s.MaxProperties = uint64p(maxMapEntries)
	s.PropertyNames = &jsonschema.Schema{
		Type:      "string",
		MaxLength: uint64p(maxDNSSubdomainLen + 1 + maxQualifiedNameLen),
		Pattern:   qualifiedKeyPattern,
	}
	s.AdditionalProperties = &jsonschema.Schema{
		Type:      "string",
		MaxLength: new(valueMaxLength),
		Pattern:   valuePattern,
	}
}

// pinKind makes a document schema's apiVersion and kind constants: APIVersion and k.
func pinKind(s *jsonschema.Schema, k Kind) {
	if p, ok := s.Properties.Get("apiVersion"); ok {
		p.Const = APIVersion
	}
	if p, ok := s.Properties.Get("kind"); ok {
		p.Const = string(k)
	}
}

// JSONSchemaExtend pins apiVersion and kind.
func (TrainingJob) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindTrainingJob)
}

// JSONSchemaExtend bounds labels and annotations.
func (ObjectMeta) JSONSchemaExtend(s *jsonschema.Schema) {
	labels, _ := s.Properties.Get("labels")
	labelMapSchema(labels, maxLabelValueLength, labelValuePattern)
	annotations, _ := s.Properties.Get("annotations")
	labelMapSchema(annotations, maxAnnotationLength, "")
}

// JSONSchemaExtend bounds the roles and their names.
func (TrainingJobSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	if p, ok := s.Properties.Get("roles"); ok {
		p.MinProperties = uint64p(1)
		p.MaxProperties = uint64p(maxRoles)
		p.PropertyNames = &jsonschema.Schema{
			Type:      "string",
			MaxLength: uint64p(maxQualifiedNameLen),
			Pattern:   dnsLabelPattern,
		}
	}
}

// JSONSchemaExtend bounds the node selector.
func (RoleSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	nodeSelector, _ := s.Properties.Get("nodeSelector")
	labelMapSchema(nodeSelector, maxLabelValueLength, labelValuePattern)
}
