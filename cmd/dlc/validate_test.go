package main

import (
	"bytes"
	"errors"
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

func TestValidatePrintsEveryFieldError(t *testing.T) {
	_, stderr, err := runCLI(t, "validate", "-f", "../../schemas/testdata/five-mistakes.yaml")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("err = %v, want exit status 1", err)
	}
	var fields []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n")[1:] {
		field, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		fields = append(fields, field)
	}
	want := []string{
		"metadata.name",
		"spec.checkpoint.uri",
		"spec.framework",
		"spec.roles.worker.replicas",
		"spec.roles.worker.resources.gpu",
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("printed field paths (-want +got):\n%s\nfull output:\n%s", diff, stderr)
	}
	if !strings.HasPrefix(stderr, "../../schemas/testdata/five-mistakes.yaml: 5 error(s)") {
		t.Errorf("header missing:\n%s", stderr)
	}
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
