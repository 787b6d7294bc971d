// Package jsonschemagen generates the JSON Schema of every document kind from the Go types
// in package schemas, with descriptions taken from their doc comments.
package jsonschemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/schemas"
)

// schemasPackage is the import path of package schemas, which doc comments are keyed by.
const schemasPackage = "github.com/opendlc/opendlc/schemas"

// BaseID prefixes the $id of every generated schema.
const BaseID = "https://opendlc.io/schemas/v1alpha1/"

// quantityPattern is the syntax of a Kubernetes quantity (as in Kubernetes' OpenAPI).
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

var quantityType = reflect.TypeFor[resource.Quantity]()

// FileName is the name of the schema file of a kind: "trainingjob.schema.json".
func FileName(k schemas.Kind) string {
	return strings.ToLower(string(k)) + ".schema.json"
}

// Generate returns the JSON Schema of every kind, keyed by file name. srcDir is the
// directory of package schemas, whose doc comments become descriptions.
func Generate(srcDir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, k := range schemas.Kinds() {
		b, err := generate(srcDir, k)
		if err != nil {
			return nil, fmt.Errorf("jsonschemagen: %s: %w", k, err)
		}
		files[FileName(k)] = b
	}
	return files, nil
}

func generate(srcDir string, k schemas.Kind) ([]byte, error) {
	r := &jsonschema.Reflector{
		ExpandedStruct: true,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == quantityType {
				return &jsonschema.Schema{Ref: "#/$defs/Quantity"}
			}
			return nil
		},
	}
	if err := r.AddGoComments(schemasPackage, srcDir); err != nil {
		return nil, fmt.Errorf("reading doc comments in %s: %w", srcDir, err)
	}
	s := r.Reflect(schemas.NewObject(k))
	s.ID = jsonschema.ID(BaseID + FileName(k))
	s.Title = string(k)
	s.Definitions["Quantity"] = &jsonschema.Schema{
		Description: `a Kubernetes quantity such as "500m", "8" or "64Gi"`,
		OneOf: []*jsonschema.Schema{
			{Type: "string", Pattern: quantityPattern},
			{Type: "number"},
		},
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
