package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTypesListsEveryTypeConstant checks that every event type constant of the package
// (a Type... constant whose value starts with "opendlc.") is in Types exactly once, and
// that docs/events.md names it: Types is what the JSON Schemas are generated from and
// what the CloudEvents SDK test of ./integration requires to see published, so a type
// added without it would be neither.
func TestTypesListsEveryTypeConstant(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i >= len(vs.Values) || !strings.HasPrefix(id.Name, "Type") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, _ := strconv.Unquote(lit.Value); strings.HasPrefix(v, "opendlc.") {
						consts[id.Name] = v
					}
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatal("no event type constants found")
	}
	listed := map[string]int{}
	for _, typ := range Types {
		listed[typ.Type]++
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range consts {
		if listed[v] != 1 {
			t.Errorf("%s (%s) is in Types %d times, want once", name, v, listed[v])
		}
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("docs/events.md does not name %s (%s)", v, name)
		}
	}
	if len(listed) != len(consts) {
		t.Errorf("Types lists %d types, the package declares %d type constants", len(listed), len(consts))
	}
}
