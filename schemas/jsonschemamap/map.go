// Package jsonschemamap holds the mappings from Go types to JSON Schema that the
// published JSON Schemas (schemas/jsonschema, `go generate ./schemas/...`) and the
// OpenAPI document (docs/openapi.json, `go generate ./api/...`) share, so that both
// describe a value as the server encodes and decodes it: a resource.Quantity, say,
// is "64Mi" or 8 on the wire, not the struct the Go type is.
package jsonschemamap

import (
	"reflect"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QuantityPattern is the syntax of a Kubernetes quantity (as in Kubernetes' OpenAPI).
const QuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

var quantityType = reflect.TypeFor[resource.Quantity]()

// Mapper is a jsonschema.Reflector's Mapper: types with a JSON form of their own refer
// to a definition of Definitions, under refPrefix ("#/$defs/" in a JSON Schema,
// "#/components/schemas/" in an OpenAPI document).
func Mapper(refPrefix string) func(reflect.Type) *jsonschema.Schema {
	return func(t reflect.Type) *jsonschema.Schema {
		if t == quantityType {
			return &jsonschema.Schema{Ref: refPrefix + "Quantity"}
		}
		return nil
	}
}

// Definitions are the schemas Mapper refers to, by name.
func Definitions() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{
		"Quantity": {
			Description: `a Kubernetes quantity such as "500m", "8" or "64Gi"`,
			OneOf: []*jsonschema.Schema{
				{Type: "string", Pattern: QuantityPattern},
				{Type: "number"},
			},
		},
	}
}

// OptionalZero takes the fields tagged omitzero (and not omitempty) out of the required
// lists of the schemas r reflected from t (root, its definitions named by name, nil for
// the type's name): encoding/json leaves such a field out when it is zero, so a valid
// document need not hold it, while the reflector knows only omitempty.
func OptionalZero(t reflect.Type, root *jsonschema.Schema, name func(reflect.Type) string) {
	optionalZero(t, t, root, name, map[reflect.Type]bool{})
}

func optionalZero(rootType, t reflect.Type, root *jsonschema.Schema, name func(reflect.Type) string, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == quantityType || seen[t] {
		return nil
	}
	seen[t] = true
	var optional []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("json"), ",")
		inner := optionalZero(rootType, f.Type, root, name, seen)
		if f.Anonymous && tag[0] == "" {
			optional = append(optional, inner...) // inlined into t's schema
			continue
		}
		if tag[0] != "-" && tag[0] != "" && slices.Contains(tag[1:], "omitzero") && !slices.Contains(tag[1:], "omitempty") {
			optional = append(optional, tag[0])
		}
	}
	if len(optional) == 0 {
		return nil
	}
	drop := func(s *jsonschema.Schema) {
		if s != nil {
			s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return slices.Contains(optional, r) })
		}
	}
	n := ""
	if name != nil {
		n = name(t)
	}
	if n == "" {
		n = t.Name()
	}
	drop(root.Definitions[n])
	if t == rootType && root.Ref == "" {
		drop(root)
	}
	return optional
}
