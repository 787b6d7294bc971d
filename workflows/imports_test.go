package workflows_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/workflows"
)

// apiPackage is the API's wire types; the workflows keep their own, which the service
// converts to and from, so that what the API takes and what histories record are two
// decisions.
const apiPackage = "github.com/opendlc/opendlc/api"

// TestWorkflowsDoNotImportAPI fails for each non-test file of the package that imports
// the API or a package under it.
func TestWorkflowsDoNotImportAPI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", name, imp.Path.Value, err)
			}
			if path == apiPackage || strings.HasPrefix(path, apiPackage+"/") {
				t.Errorf("%s imports %s: the workflows keep their own types; convert in service/",
					fset.Position(imp.Pos()), path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no non-test .go files found in the workflows package")
	}
}

// TestUpdateTypesMatchAPI checks that each update type the service converts an API type
// to or from has the same fields, field types and JSON tags, in the same order, so that
// the service's field-by-field conversion loses nothing and the JSON stays the same.
func TestUpdateTypesMatchAPI(t *testing.T) {
	pairs := []struct{ wf, api any }{
		{workflows.PauseScheduleRequest{}, api.PauseScheduleRequest{}},
		{workflows.TriggerScheduleRequest{}, api.TriggerScheduleRequest{}},
		{workflows.TriggerScheduleResult{}, api.TriggerScheduleResult{}},
		{workflows.BackfillScheduleRequest{}, api.BackfillScheduleRequest{}},
		{workflows.BackfillScheduleResult{}, api.BackfillScheduleResult{}},
		{workflows.ScaleRequest{}, api.ScaleRequest{}},
		{workflows.ScaleResult{}, api.ScaleResult{}},
		{workflows.EnqueueRequest{}, api.EnqueueRequest{}},
		{workflows.ExtendRequest{}, api.ExtendRequest{}},
	}
	for _, p := range pairs {
		wf, a := reflect.TypeOf(p.wf), reflect.TypeOf(p.api)
		if wf.NumField() != a.NumField() {
			t.Errorf("workflows.%s has %d fields, api.%s %d", wf.Name(), wf.NumField(), a.Name(), a.NumField())
			continue
		}
		for i := range wf.NumField() {
			f, g := wf.Field(i), a.Field(i)
			if f.Name != g.Name || f.Type != g.Type || f.Tag != g.Tag {
				t.Errorf("workflows.%s field %d is %s %s `%s`, api.%s's is %s %s `%s`",
					wf.Name(), i, f.Name, f.Type, f.Tag, a.Name(), g.Name, g.Type, g.Tag)
			}
		}
	}
}
