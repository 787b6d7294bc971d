package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// experimentDoc is a grid experiment of one trial that runs command.
func experimentDoc(ws, name, command string) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace: [{name: x, type: categorical, values: ["1"]}]
  objective: {metric: accuracy, direction: maximize}
  algorithm: {name: grid}
  maxTrials: 1
  parallelism: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, %q]
    roles: {worker: {replicas: 1}}
`, name, ws, command)
}

// triggerDoc is a trigger that runs a one-replica job for every event on its subject.
func triggerDoc(ws, name string) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: %[2]s, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.%[2]s
  action:
    job:
      framework: custom
      command: [sh, -c, 'true']
      roles: {worker: {replicas: 1}}
`, ws, name)
}

// accessScope is where a route finds the workspace it acts in, which decides the
// answer to a caller of another workspace.
type accessScope int

const (
	// byPath: the {ws} path segment; another workspace answers 404 before the role is
	// checked.
	byPath accessScope = iota
	// byDocument: the document's workspace; the role is checked first, and another
	// workspace is refused with 403.
	byDocument
	// byLookup: a token route; the role is checked first, then another workspace's
	// tokens answer 404.
	byLookup
)

// The access table for the kinds beyond jobs and rules, and for the workspace-admin
// role, through the SDK on the real stack: a viewer, a member and a workspace admin of
// A, and the global admin, try every action on experiments, schedules, pipelines,
// triggers, quota and tokens in A and in B. A workspace admin manages A's tokens (never
// B's, never an admin token, never one outliving its own) but not quotas or
// workspaces; afterwards B's objects are as they were.
func TestAuthAccessTableKinds(t *testing.T) {
	// Valid tokens only (403 and 404 spend no failed-authentication budget): it can
	// share the stack with the other parallel tests.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a, b := "authk-a", "authk-b"
	const long = "sleep 600"
	for _, ws := range []string{a, b} {
		ensureWorkspace(t, ctx, ws)
		mustDo(t, "fixture experiment", func() error { _, err := env.api.CreateExperiment(ctx, experimentDoc(ws, "e", long)); return err })
		mustDo(t, "fixture schedule", func() error {
			_, err := env.api.CreateSchedule(ctx, scheduleDoc(ws, "s", "0 0 1 1 *", ""))
			return err
		})
		mustDo(t, "fixture pipeline", func() error { _, err := env.api.RunPipeline(ctx, pipelineDoc(ws, "p", 600), nil); return err })
		mustDo(t, "fixture trigger", func() error { _, err := env.api.ApplyTrigger(ctx, triggerDoc(ws, "tr")); return err })
		mustDo(t, "fixture token", func() error {
			_, err := env.api.CreateToken(ctx, api.TokenRequest{Name: "tok-" + ws, Workspace: ws, Role: api.RoleViewer})
			return err
		})
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, ws := range []string{a, b} {
			_, _ = env.api.StopExperiment(bg, ws, "e", "test over")
			_, _ = env.api.StopPipeline(bg, ws, "p", "test over")
			_ = env.api.DeleteSchedule(bg, ws, "s")
			_ = env.api.RevokeToken(bg, "tok-"+ws)
		}
	})

	wsAdmin := tokenClient(t, ctx, "authk-wsadmin-a", a, api.RoleWorkspaceAdmin, time.Hour)
	identities := []struct {
		name   string
		role   api.Role
		client *dlc.Client
	}{
		{"viewer-a", api.RoleViewer, tokenClient(t, ctx, "authk-viewer-a", a, api.RoleViewer, time.Hour)},
		{"member-a", api.RoleMember, tokenClient(t, ctx, "authk-member-a", a, api.RoleMember, time.Hour)},
		{"wsadmin-a", api.RoleWorkspaceAdmin, wsAdmin},
		{"admin", api.RoleAdmin, env.api},
	}
	// fixture is the existing object an action reads or is refused on; prepare, when
	// set, makes a fresh target of the action's own for a call expected to succeed.
	type action struct {
		name    string
		verb    auth.Verb
		scope   accessScope
		fixture string
		prepare func(ws, target string) error
		run     func(c *dlc.Client, ws, target, fresh string) error
	}
	newExperiment := func(ws, target string) error {
		_, err := env.api.CreateExperiment(ctx, experimentDoc(ws, target, long))
		return err
	}
	newPipeline := func(ws, target string) error {
		_, err := env.api.RunPipeline(ctx, pipelineDoc(ws, target, 600), nil)
		return err
	}
	actions := []action{
		{name: "create experiment", verb: auth.VerbWrite, scope: byDocument, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.CreateExperiment(ctx, experimentDoc(ws, fresh, "true"))
			return err
		}},
		{name: "get experiment", verb: auth.VerbRead, fixture: "e", run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.GetExperiment(ctx, ws, target)
			return err
		}},
		{name: "list experiments", verb: auth.VerbRead, run: func(c *dlc.Client, ws, _, _ string) error {
			_, err := c.ListExperiments(ctx, ws, dlc.ListOptions{})
			return err
		}},
		{name: "stop experiment", verb: auth.VerbWrite, fixture: "e", prepare: newExperiment, run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.StopExperiment(ctx, ws, target, "access table")
			return err
		}},
		{name: "delete experiment", verb: auth.VerbWrite, fixture: "e", prepare: newExperiment, run: func(c *dlc.Client, ws, target, _ string) error {
			return c.DeleteExperiment(ctx, ws, target)
		}},
		{name: "create schedule", verb: auth.VerbWrite, scope: byDocument, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.CreateSchedule(ctx, scheduleDoc(ws, fresh, "0 0 1 1 *", ""))
			if err == nil {
				_ = env.api.DeleteSchedule(ctx, ws, fresh)
			}
			return err
		}},
		{name: "get schedule", verb: auth.VerbRead, fixture: "s", run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.GetSchedule(ctx, ws, target, 1)
			return err
		}},
		{name: "list schedules", verb: auth.VerbRead, run: func(c *dlc.Client, ws, _, _ string) error {
			_, err := c.ListSchedules(ctx, ws, 0, "")
			return err
		}},
		{name: "pause schedule", verb: auth.VerbWrite, fixture: "s", prepare: func(ws, target string) error {
			_, err := env.api.CreateSchedule(ctx, scheduleDoc(ws, target, "0 0 1 1 *", ""))
			return err
		}, run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.PauseSchedule(ctx, ws, target, "access table")
			if err == nil {
				_ = env.api.DeleteSchedule(ctx, ws, target)
			}
			return err
		}},
		{name: "delete schedule", verb: auth.VerbWrite, fixture: "s", prepare: func(ws, target string) error {
			_, err := env.api.CreateSchedule(ctx, scheduleDoc(ws, target, "0 0 1 1 *", ""))
			return err
		}, run: func(c *dlc.Client, ws, target, _ string) error { return c.DeleteSchedule(ctx, ws, target) }},
		{name: "run pipeline", verb: auth.VerbWrite, scope: byDocument, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.RunPipeline(ctx, pipelineDoc(ws, fresh, 0), nil)
			return err
		}},
		{name: "get pipeline", verb: auth.VerbRead, fixture: "p", run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.GetPipeline(ctx, ws, target)
			return err
		}},
		{name: "list pipelines", verb: auth.VerbRead, run: func(c *dlc.Client, ws, _, _ string) error {
			_, err := c.ListPipelines(ctx, ws, dlc.ListOptions{})
			return err
		}},
		{name: "stop pipeline", verb: auth.VerbWrite, fixture: "p", prepare: newPipeline, run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.StopPipeline(ctx, ws, target, "access table")
			return err
		}},
		{name: "delete pipeline", verb: auth.VerbWrite, fixture: "p", prepare: newPipeline, run: func(c *dlc.Client, ws, target, _ string) error {
			return c.DeletePipeline(ctx, ws, target)
		}},
		{name: "apply trigger", verb: auth.VerbWrite, scope: byDocument, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.ApplyTrigger(ctx, triggerDoc(ws, fresh))
			return err
		}},
		{name: "get trigger", verb: auth.VerbRead, fixture: "tr", run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.GetTrigger(ctx, ws, target)
			return err
		}},
		{name: "list triggers", verb: auth.VerbRead, run: func(c *dlc.Client, ws, _, _ string) error {
			_, err := c.ListTriggers(ctx, ws)
			return err
		}},
		{name: "delete trigger", verb: auth.VerbWrite, fixture: "tr", prepare: func(ws, target string) error {
			_, err := env.api.ApplyTrigger(ctx, triggerDoc(ws, target))
			return err
		}, run: func(c *dlc.Client, ws, target, _ string) error { return c.DeleteTrigger(ctx, ws, target) }},
		{name: "get quota", verb: auth.VerbRead, run: func(c *dlc.Client, ws, _, _ string) error {
			_, err := c.GetQuota(ctx, ws)
			return err
		}},
		{name: "set quota", verb: auth.VerbAdmin, run: func(c *dlc.Client, ws, _, _ string) error {
			return c.SetQuota(ctx, ws, api.Quota{CPU: "64"})
		}},
		{name: "create token", verb: auth.VerbTokens, scope: byDocument, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.CreateToken(ctx, api.TokenRequest{Name: fresh, Workspace: ws, Role: api.RoleMember})
			if err == nil {
				_ = env.api.RevokeToken(ctx, fresh)
			}
			return err
		}},
		{name: "list tokens", verb: auth.VerbTokens, scope: byLookup, run: func(c *dlc.Client, ws, _, _ string) error {
			l, err := c.ListTokens(ctx, ws)
			if err == nil {
				for _, tok := range l.Items {
					if tok.Workspace != ws {
						return fmt.Errorf("listed token %s of workspace %s", tok.Name, tok.Workspace)
					}
				}
			}
			return err
		}},
		{name: "revoke token", verb: auth.VerbTokens, scope: byLookup, prepare: func(ws, target string) error {
			_, err := env.api.CreateToken(ctx, api.TokenRequest{Name: target, Workspace: ws, Role: api.RoleViewer})
			return err
		}, run: func(c *dlc.Client, ws, target, _ string) error {
			if target == "" {
				target = "tok-" + ws
			}
			return c.RevokeToken(ctx, target)
		}},
	}
	n := 0
	for _, id := range identities {
		for _, ws := range []string{a, b} {
			own := id.role == api.RoleAdmin || ws == a
			for _, act := range actions {
				n++
				fresh := fmt.Sprintf("k%d", n)
				may := auth.Allows(id.role, act.verb)
				want := allowed
				switch {
				case act.scope == byPath && !own:
					want = notFound
				case !may:
					want = forbidden
				case !own && act.scope == byDocument:
					want = forbidden
				case !own:
					want = notFound
				}
				target := act.fixture
				if want == allowed && act.prepare != nil {
					target = fresh + "-target"
					if err := act.prepare(ws, target); err != nil {
						t.Fatalf("prepare %s in %s: %v", act.name, ws, err)
					}
				}
				err := act.run(id.client, ws, target, fresh)
				if got := outcomeOf(err); got != want {
					t.Errorf("%s %s in %s: %s, want %s", id.name, act.name, ws, got, want)
				}
			}
		}
	}

	// A workspace admin cannot mint an admin token, nor one that outlives its own.
	if _, err := wsAdmin.CreateToken(ctx, api.TokenRequest{Name: "authk-escalate", Workspace: api.AllWorkspaces, Role: api.RoleAdmin}); outcomeOf(err) != forbidden {
		t.Errorf("a workspace admin creating an admin token: %v, want 403", err)
	}
	if _, err := wsAdmin.CreateToken(ctx, api.TokenRequest{Name: "authk-longer", Workspace: a, Role: api.RoleMember, TTL: schemas.Duration(48 * time.Hour)}); !isStatus(err, 422) {
		t.Errorf("a workspace admin's token outliving its own: %v, want 422", err)
	}
	capped, err := wsAdmin.CreateToken(ctx, api.TokenRequest{Name: "authk-capped", Workspace: a, Role: api.RoleMember})
	if err != nil {
		t.Fatalf("a workspace admin's token with the default ttl: %v", err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), "authk-capped") })
	self, err := wsAdmin.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if capped.ExpiresAt == nil || self.ExpiresAt == nil || capped.ExpiresAt.After(*self.ExpiresAt) {
		t.Errorf("the default-ttl token expires %v, after its creator's %v", capped.ExpiresAt, self.ExpiresAt)
	}

	// B is as it was.
	if e, err := env.api.GetExperiment(ctx, b, "e"); err != nil || e.Status.Phase.Terminal() {
		t.Errorf("B's experiment after the table: %+v, %v", e, err)
	}
	if p, err := env.api.GetPipeline(ctx, b, "p"); err != nil || p.Status.Phase.Terminal() {
		t.Errorf("B's pipeline after the table: %+v, %v", p, err)
	}
	if s, err := env.api.GetSchedule(ctx, b, "s", 0); err != nil || s.Status.Paused {
		t.Errorf("B's schedule after the table: %+v, %v", s, err)
	}
	if _, err := env.api.GetTrigger(ctx, b, "tr"); err != nil {
		t.Errorf("B's trigger after the table: %v", err)
	}
	toks, err := env.api.ListTokens(ctx, b)
	if err != nil || len(toks.Items) != 1 || toks.Items[0].Name != "tok-"+b {
		t.Errorf("B's tokens after the table: %+v, %v", toks, err)
	}
}

// mustDo fails the test when fn does.
func mustDo(t *testing.T, what string, fn func() error) {
	t.Helper()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// isStatus reports whether err is an API answer with that HTTP status.
func isStatus(err error, status int) bool {
	var apiErr *dlc.Error
	return errors.As(err, &apiErr) && apiErr.Status == status
}
