package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.Execute()
	return out.String(), errb.String(), err
}

// checkValidateFails runs dlc validate on file and checks that it exits 1 with a
// header that counts the errors and one line for each of the fields named in want, in
// that order.
func checkValidateFails(t *testing.T, file string, want []string) {
	t.Helper()
	_, stderr, err := runCLI(t, "validate", "-f", file)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("err = %v, want exit status 1", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if header := fmt.Sprintf("%s: %d error(s)", file, len(want)); lines[0] != header {
		t.Errorf("header %q, want %q", lines[0], header)
	}
	var fields []string
	for _, line := range lines[1:] {
		field, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		fields = append(fields, field)
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("printed field paths (-want +got):\n%s\nfull output:\n%s", diff, stderr)
	}
}

// writeDoc writes doc to a file in a temporary directory and returns its path.
func writeDoc(t *testing.T, doc string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "doc.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestValidatePrintsEveryFieldError(t *testing.T) {
	checkValidateFails(t, "../../schemas/testdata/five-mistakes.yaml", []string{
		"metadata.name",
		"spec.checkpoint.uri",
		"spec.framework",
		"spec.roles.worker.replicas",
		"spec.roles.worker.resources.gpu",
	})
}

func TestValidateAcceptsTheExampleJob(t *testing.T) {
	stdout, stderr, err := runCLI(t, "validate", "-f", "../../examples/trainer/job.yaml")
	if err != nil {
		t.Fatalf("err = %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "valid") {
		t.Errorf("stdout = %q", stdout)
	}
}

func TestValidateUnknownFieldNamesItsPath(t *testing.T) {
	_, stderr, err := runCLI(t, "validate", "-f", "testdata/unknown-field.yaml")
	if err == nil {
		t.Fatal("want an error")
	}
	if !strings.Contains(stderr, "spec.roles.worker.replica: unknown field") {
		t.Errorf("stderr = %q", stderr)
	}
}

// validate takes a document of every kind: the examples (and a rule) are valid, and a
// broken document of another kind than TrainingJob prints its problems' field paths and
// exits 1.
func TestValidateEveryKind(t *testing.T) {
	valid := map[string]string{
		"TrainingJob":                "../../examples/trainer/job.yaml",
		"Experiment":                 "../../examples/experiment/tune.yaml",
		"Schedule":                   "../../examples/schedule/nightly.yaml",
		"Schedule of experiments":    "../../examples/schedule/weekly-tune.yaml",
		"Schedule of pipelines":      "../../examples/schedule/nightly-pipeline.yaml",
		"Schedule of a template":     "../../examples/schedule/nightly-template.yaml",
		"Pipeline":                   "../../examples/pipeline/retrain.yaml",
		"Trigger":                    "../../examples/trigger/on-new-data.yaml",
		"NotificationRule":           "../../schemas/testdata/notificationrule-valid.yaml",
		"NotificationRule (as JSON)": "../../schemas/testdata/notificationrule-minimal.json",
	}
	for name, file := range valid {
		t.Run("valid "+name, func(t *testing.T) {
			stdout, stderr, err := runCLI(t, "validate", "-f", file)
			if err != nil || stdout != file+": valid\n" {
				t.Errorf("stdout %q, err %v\n%s", stdout, err, stderr)
			}
		})
	}

	invalid := map[string]struct {
		doc    string
		fields []string
	}{
		"Schedule": {doc: `apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec:
  cron: "61 2 * * *"
  action:
    experimentTemplate:
      spec:
        searchSpace: [{name: lr, type: float, min: 0.1, max: 0.01}]
        objective: {metric: accuracy, direction: maximize}
        maxTrials: 4
        trialTemplate: {framework: custom, command: [train, "${params.lr}"], roles: {worker: {replicas: 1}}}
`, fields: []string{"spec.action.experimentTemplate.spec.searchSpace[0].max", "spec.cron"}},
		"Pipeline": {doc: `apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  steps:
    - {name: a, dependsOn: [b], job: {framework: custom, command: ["true"], roles: {worker: {replicas: 1}}}}
    - {name: b, dependsOn: [a], condition: {expression: "1 > 0"}}
`, fields: []string{"spec.steps[1].dependsOn"}},
		"unknown kind": {doc: "kind: Model\nmetadata: {name: m}\n", fields: []string{"kind"}},
	}
	for name, tt := range invalid {
		t.Run("invalid "+name, func(t *testing.T) {
			checkValidateFails(t, writeDoc(t, tt.doc), tt.fields)
		})
	}
}
