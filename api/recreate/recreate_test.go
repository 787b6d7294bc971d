package recreate

import (
	"go/format"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func testJob(t *testing.T, extra string) *schemas.TrainingJob {
	t.Helper()
	job, err := schemas.DecodeValid([]byte(`apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: copy-me, workspace: vision, labels: {team: cv}}
spec:
  framework: custom
  command: [sh, -c, '`+extra+`']
  roles: {worker: {replicas: 2}}
  timeout: 1h
`), schemas.DecodeTrainingJob)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// The Go program is gofmt-formatted Go, and its spec constant is the job's YAML, also
// when the spec holds a backquote; the dlc command feeds the same YAML on stdin.
func TestGoProgramIsFormattedGo(t *testing.T) {
	job := testJob(t, "echo `date` $HOME")
	s, err := Job(job)
	if err != nil {
		t.Fatal(err)
	}
	formatted, err := format.Source([]byte(s.Go))
	if err != nil {
		t.Fatalf("not Go: %v\n%s", err, s.Go)
	}
	if string(formatted) != s.Go {
		t.Errorf("not gofmt-formatted:\n%s", s.Go)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", s.Go, 0)
	if err != nil || f.Name.Name != "main" {
		t.Fatalf("parse: %v", err)
	}
	if !strings.Contains(s.Go, "echo ` + \"`\" + `date` + \"`\" + ` $HOME") {
		t.Errorf("the backquotes are not spliced in:\n%s", s.Go)
	}
	if !strings.HasPrefix(s.DLC, "dlc job submit -f - <<'OPENDLC_SPEC'\n") || !strings.HasSuffix(s.DLC, "\nOPENDLC_SPEC\n") {
		t.Errorf("dlc command:\n%s", s.DLC)
	}
	for _, want := range []string{"name: copy-me", "workspace: vision", "team: cv", "timeout: 1h0m0s", "echo `date` $HOME"} {
		if !strings.Contains(s.DLC, want) {
			t.Errorf("dlc command lacks %q:\n%s", want, s.DLC)
		}
	}
	text := s.Text()
	if !strings.HasPrefix(text, "#!/bin/sh\n") || !strings.Contains(text, s.DLC) || !strings.Contains(text, ": <<'OPENDLC_GO'\n"+s.Go+"OPENDLC_GO\n") {
		t.Errorf("text:\n%s", text)
	}
}

// A spec line equal to the here-document's delimiter gets a longer delimiter.
func TestHereDocDelimiterIsNotInTheSpec(t *testing.T) {
	got := hereDoc("cat ", "a\nOPENDLC_SPEC\nb\n", "OPENDLC_SPEC")
	want := "cat <<'OPENDLC_SPEC_'\na\nOPENDLC_SPEC\nb\nOPENDLC_SPEC_\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
