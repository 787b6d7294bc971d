package integration

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// Clone starts a new job from an existing one's spec with overrides; the clone's spec
// is the original's plus exactly the overrides. Lists filter by framework and label
// (Temporal search attributes).
func TestCloneAndListFilters(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: base, workspace: %s, labels: {team: cv, stage: dev}}
spec:
  framework: pytorch
  command: [sh, -c, 'echo replica $DLC_REPLICA of $WORLD_SIZE']
  roles: {worker: {replicas: 1}}
  timeout: 5m
`, ws))
	base := waitTerminal(t, ctx, ws, "base")

	clone, err := env.api.CloneJob(ctx, ws, "base", "bigger", map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"stage": "prod"}},
		"spec":     map[string]any{"roles": map[string]any{"worker": map[string]any{"replicas": 3}}},
	})
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	want := base.Spec
	want.Metadata.Name = "bigger"
	want.Metadata.Labels = map[string]string{"team": "cv", "stage": "prod"}
	w := want.Spec.Roles["worker"]
	w.Replicas = 3
	want.Spec.Roles = map[string]schemas.RoleSpec{"worker": w}
	if diff := cmp.Diff(want, clone.Spec); diff != "" {
		t.Errorf("cloned spec (-want +got):\n%s", diff)
	}
	if st := waitTerminal(t, ctx, ws, "bigger").Status; st.Phase != schemas.JobSucceeded || len(st.Replicas) != 3 {
		t.Errorf("clone: %s with %d replicas", st.Phase, len(st.Replicas))
	}
	// An override that breaks the spec is refused with its field path; nothing starts.
	_, err = env.api.CloneJob(ctx, ws, "base", "broken", map[string]any{
		"spec": map[string]any{"roles": map[string]any{"worker": map[string]any{"replicas": 0}}},
	})
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity ||
		len(apiErr.API.Details) != 1 || apiErr.API.Details[0].Field != "spec.roles.worker.replicas" {
		t.Errorf("bad clone = %v, want 422 naming spec.roles.worker.replicas", err)
	}
	if _, err := env.api.GetJob(ctx, ws, "broken"); !dlc.IsNotFound(err) {
		t.Errorf("the refused clone exists: %v", err)
	}

	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: other, workspace: %s, labels: {team: nlp}}
spec:
  framework: custom
  command: ["true"]
  roles: {worker: {replicas: 1}}
`, ws))
	waitTerminal(t, ctx, ws, "other")
	list := func(opts dlc.ListOptions) []string {
		l, err := env.api.ListJobs(ctx, ws, opts)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		sort.Strings(names)
		return names
	}
	for _, c := range []struct {
		opts dlc.ListOptions
		want []string
	}{
		{dlc.ListOptions{}, []string{"base", "bigger", "other"}},
		{dlc.ListOptions{Framework: "pytorch"}, []string{"base", "bigger"}},
		{dlc.ListOptions{Labels: []string{"team=cv"}}, []string{"base", "bigger"}},
		{dlc.ListOptions{Labels: []string{"team=cv", "stage=prod"}}, []string{"bigger"}},
		{dlc.ListOptions{Framework: "custom", Labels: []string{"team=nlp"}}, []string{"other"}},
	} {
		// Visibility is eventually consistent: poll.
		testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("list %+v to be %v", c.opts, c.want), func() error {
			if got := list(c.opts); cmp.Diff(c.want, got) != "" {
				return fmt.Errorf("got %v", got)
			}
			return nil
		}, itest.PollInterval)
	}
}
