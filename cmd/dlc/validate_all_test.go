package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dlc validate prints the type mistakes (a bad quantity, a bad duration, a string for a
// number, an unknown field) and the semantic ones of a document together.
func TestValidatePrintsTypeAndSemanticErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.yaml")
	doc := `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: Bad_Name}
spec:
  framework: pytorh
  command: [train]
  roles: {worker: {replicas: 0, resources: {cpu: lots}}, master: {replicas: one}}
  timeout: 2 days
  tiemout: 1h
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runCLI(t, "validate", "-f", file)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("err = %v, want exit status 1", err)
	}
	var fields []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n")[1:] {
		field, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		fields = append(fields, field)
	}
	want := []string{"metadata.name", "spec.framework", "spec.roles.master.replicas", "spec.roles.worker.replicas",
		"spec.roles.worker.resources.cpu", "spec.tiemout", "spec.timeout"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("printed field paths (-want +got):\n%s\nfull output:\n%s", diff, stderr)
	}
	if !strings.HasPrefix(stderr, file+": 7 error(s)") {
		t.Errorf("header missing:\n%s", stderr)
	}
}
