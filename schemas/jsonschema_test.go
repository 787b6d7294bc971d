package schemas_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas/internal/jsonschemagen"
)

const regenerate = "go generate ./schemas/..."

// TestJSONSchemaUpToDate fails when the checked-in JSON Schemas differ from what the Go
// types generate.
func TestJSONSchemaUpToDate(t *testing.T) {
	generated, err := jsonschemagen.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("jsonschema")
	if err != nil {
		t.Fatalf("%v; run %s", err, regenerate)
	}
	var checkedIn []string
	for _, e := range entries {
		checkedIn = append(checkedIn, e.Name())
	}
	var want []string
	for name := range generated {
		want = append(want, name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, checkedIn); diff != "" {
		t.Errorf("files in schemas/jsonschema (-generated +checked in):\n%s\nRun %s and remove stale files.", diff, regenerate)
	}
	for _, name := range want {
		got, err := os.ReadFile(filepath.Join("jsonschema", name))
		if err != nil {
			t.Errorf("%v; run %s", err, regenerate)
			continue
		}
		if diff := cmp.Diff(string(generated[name]), string(got)); diff != "" {
			t.Errorf("schemas/jsonschema/%s is out of date; run %s\n(-generated +checked in):\n%s", name, regenerate, diff)
		}
	}
}

// TestJSONSchemaRefs checks that every $ref of the checked-in schemas resolves.
func TestJSONSchemaRefs(t *testing.T) {
	data, err := os.ReadFile("jsonschema/trainingjob.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs = append(refs, ref)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(refs) == 0 {
		t.Fatal("no $ref found")
	}
	for _, ref := range refs {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if _, defined := schema.Defs[name]; !ok || !defined {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}
}
