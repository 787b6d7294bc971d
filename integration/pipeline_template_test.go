package integration

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// A stored PipelineTemplate on the real stack: applied (an invalid one refused, naming
// the field), listed, run by name with a parameter (the run records the template's spec
// and name), changed without changing the run it started, and invisible from another
// workspace: a member of that workspace can neither read nor run it (404).
func TestPipelineTemplateStoredAndRun(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	other := ws + "-b"
	ensureWorkspace(t, ctx, ws)
	ensureWorkspace(t, ctx, other)
	c := env.api
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: nightly, workspace: %s, labels: {team: cv}}
spec:
  params: [{name: note, default: "unset"}]
  steps:
    - name: hello
      job: {framework: custom, command: [sh, -c, 'echo "note=$0"', "${params.note}"], roles: {worker: {replicas: 1}}}
`, ws)
	bad := strings.Replace(doc, "replicas: 1", "replicas: 0", 1)
	var apiErr *dlc.Error
	if _, err := c.ApplyPipelineTemplate(ctx, []byte(bad)); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity ||
		len(apiErr.API.Details) == 0 || apiErr.API.Details[0].Field != "spec.steps[0].job.roles.worker.replicas" {
		t.Fatalf("an invalid template: %v, want 422 on spec.steps[0].job.roles.worker.replicas", err)
	}
	if _, err := c.GetPipelineTemplate(ctx, ws, "nightly"); !dlc.IsNotFound(err) {
		t.Fatalf("the invalid template was stored: %v", err)
	}
	if _, err := c.ApplyPipelineTemplate(ctx, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListPipelineTemplates(ctx, ws)
	if err != nil || len(list.Items) != 1 || list.Items[0].Metadata.Name != "nightly" {
		t.Fatalf("list: %+v, %v; want nightly", list, err)
	}

	// Another workspace sees nothing of it, by any route.
	b := tokenClient(t, ctx, other+"-member", other, api.RoleMember, time.Hour)
	// (Another workspace's objects are hidden: 404, as if they did not exist.)
	if _, err := b.GetPipelineTemplate(ctx, ws, "nightly"); !dlc.IsNotFound(err) {
		t.Errorf("a member of %s reading %s's template: %v, want 404", other, ws, err)
	}
	if _, err := b.RunPipelineTemplate(ctx, ws, "nightly", "stolen", nil); !dlc.IsNotFound(err) {
		t.Errorf("a member of %s running %s's template: %v, want 404", other, ws, err)
	}
	if _, err := c.GetPipeline(ctx, ws, "stolen"); !dlc.IsNotFound(err) {
		t.Errorf("the refused run exists: %v", err)
	}
	if _, err := b.RunPipelineTemplate(ctx, other, "nightly", "stolen", nil); !dlc.IsNotFound(err) {
		t.Errorf("running nightly in %s: %v, want 404", other, err)
	}
	if l, err := b.ListPipelineTemplates(ctx, other); err != nil || len(l.Items) != 0 {
		t.Errorf("%s's templates: %+v, %v; want none", other, l, err)
	}

	// A run by name, with a parameter; an unknown parameter is refused.
	if _, err := c.RunPipelineTemplate(ctx, ws, "nightly", "n1", map[string]string{"nope": "x"}); !errors.As(err, &apiErr) ||
		apiErr.Status != http.StatusBadRequest && apiErr.Status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown parameter: %v, want 400 or 422", err)
	}
	run, err := c.RunPipelineTemplate(ctx, ws, "nightly", "n1", map[string]string{"note": "first"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Spec.Metadata.Annotations[schemas.AnnotationPipelineTemplate] != "nightly" || run.Spec.Metadata.Labels["team"] != "cv" {
		t.Errorf("the run's metadata %+v: want the template's name and labels", run.Spec.Metadata)
	}
	// Changing the template now does not change the run.
	if _, err := c.ApplyPipelineTemplate(ctx, []byte(strings.Replace(doc, `note=$0`, `changed=$0`, 1))); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(ctx, ws, "n1", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run n1 %s (%s), want Succeeded", p.Status.Phase, p.Status.Message)
	}
	var lines []string
	for _, r := range jobLogs(t, ctx, ws, "n1-hello") {
		lines = append(lines, r.Line)
	}
	if !cmp.Equal(lines, []string{"note=first"}) {
		t.Errorf("n1-hello's logs %q, want [note=first]", lines)
	}
	if err := c.DeletePipelineTemplate(ctx, ws, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunPipelineTemplate(ctx, ws, "nightly", "n2", nil); !dlc.IsNotFound(err) {
		t.Errorf("running a deleted template: %v, want 404", err)
	}
	if _, err := c.GetPipeline(ctx, ws, "n1"); err != nil {
		t.Errorf("deleting the template changed its run: %v", err)
	}
}
