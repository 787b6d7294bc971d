package workflows

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVersionsTable checks that versions is the one table of change ids: well formed,
// the same rows as the "Versioned changes" table of docs/architecture.md, holding
// every change id that workflow code passes to workflow.GetVersion, and reusing no
// retired id (each of which the docs name).
func TestVersionsTable(t *testing.T) {
	first, err := time.Parse(time.DateOnly, firstVersion)
	if err != nil {
		t.Fatalf("firstVersion %q: %v", firstVersion, err)
	}
	ids := map[string]bool{}
	for i, c := range versions {
		if c.id == "" || c.what == "" {
			t.Errorf("versions[%d] = %+v: id and what are required", i, c)
		}
		if ids[c.id] {
			t.Errorf("change id %q listed twice", c.id)
		}
		ids[c.id] = true
		since, err := time.Parse(time.DateOnly, c.since)
		if err != nil || since.Before(first) {
			t.Errorf("change %q since %q: want a date (YYYY-MM-DD) not before the first version %s", c.id, c.since, firstVersion)
		}
		if i > 0 && c.since < versions[i-1].since {
			t.Errorf("change %q (%s) listed after %q (%s): oldest first", c.id, c.since, versions[i-1].id, versions[i-1].since)
		}
	}

	section, rows := docsVersions(t, filepath.Join("..", "docs", "architecture.md"))
	if !strings.Contains(section, "first version") || !strings.Contains(section, firstVersion) {
		t.Errorf("docs/architecture.md, Versioned changes: does not name the first version (%s)", firstVersion)
	}
	if len(rows) != len(versions) {
		t.Errorf("docs/architecture.md lists %d versioned changes, workflows/versions.go %d", len(rows), len(versions))
	}
	for i := range min(len(rows), len(versions)) {
		if got, want := rows[i], versions[i]; got.id != want.id || got.since != want.since {
			t.Errorf("versioned change %d: docs (%s, %s), versions.go (%s, %s)", i, got.id, got.since, want.id, want.since)
		}
	}

	for _, id := range getVersionIDs(t) {
		if !ids[id] {
			t.Errorf("workflow.GetVersion change id %q is not in versions (workflows/versions.go)", id)
		}
	}
	for _, id := range retiredChangeIDs {
		if ids[id] {
			t.Errorf("change id %q is retired (retiredChangeIDs): a history may carry its marker, so it is never used again", id)
		}
		if !strings.Contains(section, "`"+id+"`") {
			t.Errorf("docs/architecture.md, Versioned changes: does not name the retired change id %q", id)
		}
	}
}

// docsVersions reads the "## Versioned changes" section of the architecture page and
// the rows of its table: | `change id` | since | what |.
func docsVersions(t *testing.T, path string) (string, []change) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var section strings.Builder
	var rows []change
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Versioned changes"
			continue
		}
		if !in {
			continue
		}
		section.WriteString(line + "\n")
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 3 || cells[0] == "change id" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, change{id: strings.Trim(cells[0], "`"), since: cells[1], what: cells[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if section.Len() == 0 {
		t.Fatalf("%s has no \"## Versioned changes\" section", path)
	}
	return section.String(), rows
}

// getVersionIDs are the change ids of every workflow.GetVersion call in the package's
// workflow code: string constants (or literals).
func getVersionIDs(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var calls []*ast.CallExpr
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, s := range n.Specs {
					vs := s.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[id.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "GetVersion" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "workflow" {
						calls = append(calls, n)
					}
				}
			}
			return true
		})
	}
	var ids []string
	for _, c := range calls {
		pos := fset.Position(c.Pos())
		if len(c.Args) < 2 {
			t.Errorf("%s: workflow.GetVersion without a change id", pos)
			continue
		}
		switch a := c.Args[1].(type) {
		case *ast.BasicLit:
			id, _ := strconv.Unquote(a.Value)
			ids = append(ids, id)
		case *ast.Ident:
			id, ok := consts[a.Name]
			if !ok {
				t.Errorf("%s: change id %s is not a string constant of the package", pos, a.Name)
				continue
			}
			ids = append(ids, id)
		default:
			t.Errorf("%s: the change id of workflow.GetVersion must be a string constant", pos)
		}
	}
	return ids
}
