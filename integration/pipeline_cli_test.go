package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// The CLI's pipeline template and retry verbs against the shared stack: a template is
// applied, listed and run by name (dlc template run, dlc pipeline run --template); a
// run whose step fails is retried (dlc pipeline retry), reusing the step that
// succeeded; the template is deleted.
func TestPipelineTemplateAndRetryCLI(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	bin := dlcBinary(t)
	dir := t.TempDir()
	dlcCmd := itest.CLI{Bin: bin, Server: env.e.APIURL, Token: env.e.AdminToken, Workspace: ws}.Runner(ctx)
	gate := filepath.Join(dir, "fixed")
	path := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: gated, workspace: %s}
spec:
  params: [{name: greeting, default: hi}]
  steps:
    - name: hello
      job: {framework: custom, command: [sh, -c, 'echo "$0"', "${params.greeting}"], roles: {worker: {replicas: 1}}}
    - name: gate
      dependsOn: [hello]
      job: {framework: custom, command: [test, -e, %q], roles: {worker: {replicas: 1}}, faultTolerance: {maxRestarts: 0}}
`, ws, gate), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(want string, args ...string) string {
		t.Helper()
		out, err := dlcCmd(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("dlc %s: %v\n%s\nwant output containing %q", strings.Join(args, " "), err, out, want)
		}
		return out
	}
	run("pipeline template "+ws+"/gated applied: 2 steps", "template", "apply", "-f", path)
	run("gated", "template", "list")
	run("default: hi", "template", "get", "gated")
	// The gate is closed: the run fails (exit 1 with --wait), its hello step succeeds.
	if out, err := dlcCmd("template", "run", "gated", "--name", "g1", "-p", "greeting=hello", "--wait"); err == nil ||
		!strings.Contains(out, "pipeline "+ws+"/g1 started from template gated") {
		t.Fatalf("dlc template run: %v\n%s\nwant a failed run", err, out)
	}
	run("Failed", "pipeline", "get", "g1")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run("pipeline "+ws+"/g1-retry-1 started, retrying g1", "pipeline", "retry", "g1", "--wait")
	out := run("reused from g1", "pipeline", "get", "g1-retry-1")
	if !strings.Contains(out, "Succeeded") {
		t.Errorf("the retry did not succeed:\n%s", out)
	}
	if _, err := env.api.GetJob(ctx, ws, "g1-retry-1-hello"); err == nil {
		t.Errorf("the retry ran hello again")
	}
	run("pipeline "+ws+"/g2 started", "pipeline", "run", "--template", "gated", "--name", "g2", "--wait")
	p, err := env.api.GetPipeline(ctx, ws, "g2")
	if err != nil || p.Status.Phase != schemas.PipelineSucceeded || p.Spec.Metadata.Annotations[schemas.AnnotationPipelineTemplate] != "gated" {
		t.Fatalf("g2: %+v, %v; want Succeeded from template gated", p, err)
	}
	run("deleted", "template", "delete", "gated")
	if out, err := dlcCmd("template", "get", "gated"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("template get after delete: %v\n%s", err, out)
	}
}
