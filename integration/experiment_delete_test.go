package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// deleteExperimentHTTP sends DELETE /v1/workspaces/{ws}/experiments/{name} with token
// and returns the status.
func deleteExperimentHTTP(t *testing.T, ctx context.Context, token, ws, name string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete,
		fmt.Sprintf("%s/v1/workspaces/%s/experiments/%s", env.e.APIURL, ws, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("delete experiment: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A finished experiment is deleted over HTTP by a member of its workspace: it and its
// trial jobs are gone (404), and an experiment of the same name can be started again.
// A viewer may not delete it, and another workspace's token is answered 404.
func TestExperimentDeleteAndReuseName(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ws, name := workspace(t), "tune-del"
	ensureWorkspace(t, ctx, ws)
	spec := tuneSpec(t, ws, name, nil,
		"maxTrials: 16", "maxTrials: 2",
		"parallelism: 4", "parallelism: 2",
		"startupTrials: 4", "startupTrials: 2",
		`args: [--epochs, "10",`, `args: [--epochs, "2",`,
		"maxResource: 10", "maxResource: 2")
	if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	done := waitExperiment(t, ctx, env.api, ws, name)
	if !done.Status.Phase.Terminal() || len(done.Status.Trials) == 0 {
		t.Fatalf("experiment ended %s with %d trials, want a final phase and trials", done.Status.Phase, len(done.Status.Trials))
	}
	var trials []string
	for _, tr := range done.Status.Trials {
		if _, err := env.api.GetJob(ctx, ws, tr.Job); err != nil {
			t.Fatalf("trial job %s before delete: %v", tr.Job, err)
		}
		trials = append(trials, tr.Job)
	}

	token := func(role api.Role, tokWS string) string {
		n := "expdel-" + string(role)
		if tokWS != ws {
			n += "-other"
		}
		tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: n, Workspace: tokWS, Role: role, TTL: schemas.Duration(time.Hour)})
		if err != nil {
			t.Fatalf("create token %s: %v", n, err)
		}
		t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), n) })
		return tok.Secret
	}
	other := ws + "-other"
	ensureWorkspace(t, ctx, other)
	if got := deleteExperimentHTTP(t, ctx, token(api.RoleViewer, ws), ws, name); got != http.StatusForbidden {
		t.Errorf("a viewer's delete: %d, want 403", got)
	}
	if got := deleteExperimentHTTP(t, ctx, token(api.RoleMember, other), ws, name); got != http.StatusNotFound {
		t.Errorf("another workspace's member's delete: %d, want 404", got)
	}
	member := token(api.RoleMember, ws)
	if got := deleteExperimentHTTP(t, ctx, member, ws, name); got != http.StatusNoContent {
		t.Fatalf("delete: %d, want 204", got)
	}
	if _, err := env.api.GetExperiment(ctx, ws, name); apiStatus(err) != http.StatusNotFound {
		t.Errorf("get after delete: %v, want 404", err)
	}
	for _, j := range trials {
		if _, err := env.api.GetJob(ctx, ws, j); apiStatus(err) != http.StatusNotFound {
			t.Errorf("trial job %s after delete: %v, want 404", j, err)
		}
	}
	if got := deleteExperimentHTTP(t, ctx, member, ws, name); got != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", got)
	}

	again, err := env.api.CreateExperiment(ctx, []byte(spec))
	if err != nil {
		t.Fatalf("create again with the same name: %v", err)
	}
	if again.UID == done.UID || again.Status.Phase != schemas.ExperimentPending {
		t.Errorf("the new experiment: uid %s (old %s), phase %s; want a new run, Pending", again.UID, done.UID, again.Status.Phase)
	}
	if x := waitExperiment(t, ctx, env.api, ws, name); !x.Status.Phase.Terminal() {
		t.Errorf("the new experiment ended %s", x.Status.Phase)
	}
}
