// Package jsonschemagen generates the JSON Schema of every document kind from the Go types
// in package schemas, with descriptions taken from their doc comments.
package jsonschemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/jsonschemamap"
)

// schemasPackage is the import path of package schemas, which doc comments are keyed by.
const schemasPackage = "github.com/opendlc/opendlc/schemas"

// BaseID prefixes the $id of every generated schema.
const BaseID = "https://opendlc.io/schemas/v1alpha1/"

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
		// The mappings the OpenAPI document shares (api/server/openapi.go).
		Mapper: jsonschemamap.Mapper("#/$defs/"),
	}
	if err := r.AddGoComments(schemasPackage, srcDir); err != nil {
		return nil, fmt.Errorf("reading doc comments in %s: %w", srcDir, err)
	}
	obj := schemas.NewObject(k)
	s := r.Reflect(obj)
	jsonschemamap.OptionalZero(reflect.TypeOf(obj), s, nil)
	s.ID = jsonschema.ID(BaseID + FileName(k))
	s.Title = string(k)
	maps.Copy(s.Definitions, jsonschemamap.Definitions())

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
