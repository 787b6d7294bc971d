package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// pipelineDoc is a pipeline of one job step that sleeps for seconds.
func pipelineDoc(ws, name string, seconds int) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: %s, workspace: %s}
spec:
  steps:
    - name: work
      job: {framework: custom, command: [sh, -c, 'sleep %d'], roles: {worker: {replicas: 1}}}
`, name, ws, seconds)
}

// A pipeline run is deleted while its step job runs: the run and its step job are gone
// (404) and the name can be used again; the finished second run is deleted too.
func TestDeletePipeline(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws, name := workspace(t), "pdel"
	c := env.api
	if _, err := c.RunPipeline(ctx, pipelineDoc(ws, name, 300), nil); err != nil {
		t.Fatalf("run: %v", err)
	}
	step := schemas.StepJobName(name, "work")
	waitFor(t, ctx, ws, step, "running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	deletePipeline(t, ctx, ws, name, step, "a running pipeline")
	if err := c.DeletePipeline(ctx, ws, name); !dlc.IsNotFound(err) {
		t.Errorf("a second delete: %v, want 404", err)
	}

	// The name is free again; a finished run is deleted as well.
	if _, err := c.RunPipeline(ctx, pipelineDoc(ws, name, 0), nil); err != nil {
		t.Fatalf("run again under the deleted name: %v", err)
	}
	if p := waitPipeline(t, ctx, ws, name); p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("second run ended %s, want Succeeded", p.Status.Phase)
	}
	deletePipeline(t, ctx, ws, name, step, "a finished pipeline")
}

// deletePipeline deletes the pipeline run ws/name (what describes it in messages) and
// checks that the run and its step job are gone (404).
func deletePipeline(t *testing.T, ctx context.Context, ws, name, step, what string) {
	t.Helper()
	c := env.api
	if err := c.DeletePipeline(ctx, ws, name); err != nil {
		t.Fatalf("delete %s: %v", what, err)
	}
	if _, err := c.GetPipeline(ctx, ws, name); !dlc.IsNotFound(err) {
		t.Errorf("get after deleting %s: %v, want 404", what, err)
	}
	if _, err := c.GetJob(ctx, ws, step); !dlc.IsNotFound(err) {
		t.Errorf("step job %s after deleting %s: %v, want 404", step, what, err)
	}
}

// A workspace that holds a job cannot be deleted (409 naming its jobs); a member may not
// delete it (403); once the job is deleted an admin deletes it, it is gone (404) and its
// tokens no longer work (401).
func TestDeleteWorkspace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	ensureWorkspace(t, ctx, ws)
	tokName := ws + "-member"
	tok, err := c.CreateToken(ctx, api.TokenRequest{Name: tokName, Workspace: ws, Role: api.RoleMember, TTL: schemas.Duration(time.Hour)})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), tokName) })
	member, err := dlc.New(env.e.APIURL, dlc.WithToken(tok.Secret))
	if err != nil {
		t.Fatal(err)
	}

	itest.Submit(t, ctx, member, itest.ShellJob(ws, "held", "echo held"))
	waitTerminal(t, ctx, ws, "held")

	var apiErr *dlc.Error
	err = c.DeleteWorkspace(ctx, ws)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.API.Message, "still holds jobs") {
		t.Fatalf("delete a workspace holding a job: %v, want 409 naming its jobs", err)
	}
	if err := member.DeleteWorkspace(ctx, ws); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Errorf("a member's delete: %v, want 403", err)
	}
	if _, err := c.GetWorkspace(ctx, ws); err != nil {
		t.Fatalf("the refused workspace: %v", err)
	}

	if err := member.DeleteJob(ctx, ws, "held"); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	if err := c.DeleteWorkspace(ctx, ws); err != nil {
		t.Fatalf("delete the emptied workspace: %v", err)
	}
	if _, err := c.GetWorkspace(ctx, ws); !dlc.IsNotFound(err) {
		t.Errorf("get after delete: %v, want 404", err)
	}
	if err := c.DeleteWorkspace(ctx, ws); !dlc.IsNotFound(err) {
		t.Errorf("a second delete: %v, want 404", err)
	}
	if _, err := member.Whoami(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("the deleted workspace's token: %v, want 401", err)
	}
	toks, err := c.ListTokens(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks.Items) != 0 {
		t.Errorf("the deleted workspace's tokens: %+v, want none", toks.Items)
	}
}
