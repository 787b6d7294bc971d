package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// tokenClient creates a token through the admin SDK and returns a client using it.
func tokenClient(t *testing.T, ctx context.Context, name, ws string, role api.Role, ttl time.Duration) *dlc.Client {
	t.Helper()
	tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: name, Workspace: ws, Role: role, TTL: schemas.Duration(ttl)})
	if err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), name) })
	c, err := dlc.New(env.e.APIURL, dlc.WithToken(tok.Secret))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ensureWorkspace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	_, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: name})
	var apiErr *dlc.Error
	if err != nil && !(errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict) {
		t.Fatalf("create workspace %s: %v", name, err)
	}
}

func jobDoc(ws, name, command string) []byte { return []byte(itest.ShellJob(ws, name, command)) }

func ruleDoc(ws, name string) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: %s, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1]}
  subject: dlc.%s.notify.%s
`, name, ws, ws, name)
}

type outcome string

const (
	allowed   outcome = "allowed"
	notFound  outcome = "404 NotFound"
	forbidden outcome = "403 PermissionDenied"
)

func outcomeOf(err error) outcome {
	var apiErr *dlc.Error
	switch {
	case err == nil:
		return allowed
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound && apiErr.API.Code == api.CodeNotFound:
		return notFound
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden && apiErr.API.Code == api.CodePermissionDenied:
		return forbidden
	}
	return outcome("error: " + err.Error())
}

// The access table through the SDK on the real stack: a viewer and a member of
// workspace A and an admin each try every kind of action on A and on B. Reads of
// another workspace answer 404 exactly like a missing object, documents naming another
// workspace are refused with 403, viewers cannot change anything, only admins manage
// tokens; and afterwards nothing in B was changed by anyone from A.
func TestAuthAccessTable(t *testing.T) {
	// Valid tokens only (403 and 404 spend no failed-authentication budget): it can
	// share the stack with the other parallel tests.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	a, b := "authz-a", "authz-b"
	for _, ws := range []string{a, b} {
		ensureWorkspace(t, ctx, ws)
		submit(t, ctx, string(jobDoc(ws, "long", "echo fixture; exec sleep 600")))
		if _, err := env.api.ApplyRule(ctx, ruleDoc(ws, "r")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ws := range []string{a, b} {
			_, _ = env.api.StopJob(context.Background(), ws, "long", "test over")
		}
	})
	for _, ws := range []string{a, b} {
		waitFor(t, ctx, ws, "long", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	}
	before, err := env.api.GetJob(ctx, b, "long")
	if err != nil {
		t.Fatal(err)
	}

	identities := []struct {
		name   string
		role   api.Role
		client *dlc.Client
	}{
		{"viewer-a", api.RoleViewer, tokenClient(t, ctx, "authz-viewer-a", a, api.RoleViewer, time.Hour)},
		{"member-a", api.RoleMember, tokenClient(t, ctx, "authz-member-a", a, api.RoleMember, time.Hour)},
		{"admin", api.RoleAdmin, env.api},
	}
	type verbKind int
	const (
		read verbKind = iota
		write
		manage
	)
	// Each action acts on ws; target is an existing job there (a fresh one when the
	// action is expected to succeed and changes it), fresh a new name.
	actions := []struct {
		name string
		verb verbKind
		// byBody: the workspace is in the document, not the path.
		byBody bool
		// consumes: the action changes or copies its target, which must then be a
		// fresh one (a clone of the long job would run for ten minutes).
		consumes bool
		run      func(c *dlc.Client, ws, target, fresh string) error
	}{
		{name: "get job", verb: read, run: func(c *dlc.Client, ws, target, _ string) error { _, err := c.GetJob(ctx, ws, target); return err }},
		{name: "list jobs", verb: read, run: func(c *dlc.Client, ws, _, _ string) error {
			l, err := c.ListJobs(ctx, ws, dlc.ListOptions{})
			if err == nil {
				for _, j := range l.Items {
					if j.Workspace != ws {
						return fmt.Errorf("listed %s/%s", j.Workspace, j.Name)
					}
				}
			}
			return err
		}},
		{name: "logs", verb: read, run: func(c *dlc.Client, ws, target, _ string) error {
			return c.Logs(ctx, ws, target, dlc.LogOptions{}, func(events.LogRecord) error { return nil })
		}},
		{name: "events", verb: read, run: func(c *dlc.Client, ws, _, _ string) error {
			return c.Events(ctx, ws, dlc.EventOptions{Since: time.Minute}, func(events.Event) error { return nil })
		}},
		{name: "get rule", verb: read, run: func(c *dlc.Client, ws, _, _ string) error { _, err := c.GetRule(ctx, ws, "r"); return err }},
		{name: "list rules", verb: read, run: func(c *dlc.Client, ws, _, _ string) error { _, err := c.ListRules(ctx, ws); return err }},
		{name: "get workspace", verb: read, run: func(c *dlc.Client, ws, _, _ string) error { _, err := c.GetWorkspace(ctx, ws); return err }},
		{name: "submit", verb: write, byBody: true, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.SubmitJob(ctx, jobDoc(ws, fresh, "true"))
			return err
		}},
		{name: "apply rule", verb: write, byBody: true, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.ApplyRule(ctx, ruleDoc(ws, fresh))
			return err
		}},
		{name: "clone", verb: write, consumes: true, run: func(c *dlc.Client, ws, target, fresh string) error {
			_, err := c.CloneJob(ctx, ws, target, fresh, nil)
			return err
		}},
		{name: "stop", verb: write, consumes: true, run: func(c *dlc.Client, ws, target, _ string) error {
			_, err := c.StopJob(ctx, ws, target, "access table")
			return err
		}},
		{name: "delete", verb: write, consumes: true, run: func(c *dlc.Client, ws, target, _ string) error { return c.DeleteJob(ctx, ws, target) }},
		{name: "delete rule", verb: write, consumes: true, run: func(c *dlc.Client, ws, target, _ string) error { return c.DeleteRule(ctx, ws, target) }},
		{name: "create token", verb: manage, byBody: true, run: func(c *dlc.Client, ws, _, fresh string) error {
			_, err := c.CreateToken(ctx, api.TokenRequest{Name: fresh, Workspace: ws, Role: api.RoleViewer})
			if err == nil {
				_ = env.api.RevokeToken(ctx, fresh)
			}
			return err
		}},
		{name: "list tokens", verb: manage, run: func(c *dlc.Client, ws, _, _ string) error { _, err := c.ListTokens(ctx, ws); return err }},
		{name: "create workspace", verb: manage, byBody: true, run: func(c *dlc.Client, _, _, fresh string) error {
			_, err := c.CreateWorkspace(ctx, api.Workspace{Name: fresh})
			return err
		}},
	}
	n := 0
	for _, id := range identities {
		for _, ws := range []string{a, b} {
			for _, act := range actions {
				n++
				fresh := fmt.Sprintf("t%d", n)
				want := allowed
				own := id.role == api.RoleAdmin || ws == a
				switch {
				case act.verb == manage && id.role != api.RoleAdmin:
					want = forbidden
				case !own && act.byBody:
					want = forbidden
				case !own:
					want = notFound
				case act.verb == write && id.role == api.RoleViewer:
					want = forbidden
				}
				target := "long"
				if strings.Contains(act.name, "rule") {
					target = "r"
				}
				if want == allowed && act.consumes {
					// A job (or rule) of its own for an action that changes it.
					target = fresh + "-target"
					if act.name == "delete rule" {
						if _, err := env.api.ApplyRule(ctx, ruleDoc(ws, target)); err != nil {
							t.Fatal(err)
						}
					} else {
						submit(t, ctx, string(jobDoc(ws, target, "true")))
					}
				}
				err := act.run(id.client, ws, target, fresh)
				if got := outcomeOf(err); got != want {
					t.Errorf("%s %s in %s: %s, want %s", id.name, act.name, ws, got, want)
					continue
				}
				// Another workspace's existing job is answered exactly as a missing one.
				if want == notFound && act.name == "get job" {
					_, ghost := env.api.GetJob(ctx, ws, "ghost")
					var e1, e2 *dlc.Error
					if errors.As(err, &e1) && errors.As(ghost, &e2) &&
						e1.API.Message != strings.ReplaceAll(e2.API.Message, "ghost", target) {
						t.Errorf("%s: %q, but a missing job answers %q", id.name, e1.API.Message, e2.API.Message)
					}
				}
				if want != allowed && act.byBody && act.verb == write {
					// A refused document created nothing.
					if _, err := env.api.GetJob(ctx, ws, fresh); !dlc.IsNotFound(err) {
						t.Errorf("%s %s in %s was refused but %s exists: %v", id.name, act.name, ws, fresh, err)
					}
				}
			}
		}
	}

	// B is as it was: its long job still runs with the same spec, its rule is there.
	after, err := env.api.GetJob(ctx, b, "long")
	if err != nil || after.Status.Phase != schemas.JobRunning || after.UID != before.UID {
		t.Errorf("B's job after the table: %+v, %v", after, err)
	}
	if _, err := env.api.GetRule(ctx, b, "r"); err != nil {
		t.Errorf("B's rule after the table: %v", err)
	}
	// A member lists only its own workspace, and sees only it in the registry.
	l, err := identities[1].client.ListWorkspaces(ctx)
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != a {
		t.Errorf("member-a's workspaces: %+v, %v", l, err)
	}
	jobs, err := identities[1].client.ListJobs(ctx, a, dlc.ListOptions{})
	if err != nil || len(jobs.Items) == 0 {
		t.Fatalf("member-a's jobs: %+v, %v", jobs, err)
	}
	for _, j := range jobs.Items {
		if j.Workspace != a {
			t.Errorf("member-a listed %s/%s", j.Workspace, j.Name)
		}
	}

	// The refused stop of B's job by member-a is in B's audit trail.
	waitAudit(t, ctx, b, func(d events.AuditData) bool {
		return d.Actor == "authz-member-a" && d.Route == "POST /v1/workspaces/{ws}/jobs/{name}/stop" &&
			d.Object == "job "+b+"/long" && d.Status == http.StatusNotFound && d.RemoteAddr != ""
	})
}

// waitAudit polls workspace ws's audit events until one satisfies match.
func waitAudit(t *testing.T, ctx context.Context, ws string, match func(events.AuditData) bool) {
	t.Helper()
	testutil.Eventually(t, itest.Left(ctx), "a matching audit event in "+ws, func() bool {
		found := false
		err := env.events.ReadUntil(ctx, jetstream.AuditStream, events.AuditSubject(ws), nil, func(_ string, data []byte) error {
			var ev events.Event
			var d events.AuditData
			if json.Unmarshal(data, &ev) == nil && ev.Type == events.TypeAudit && json.Unmarshal(ev.Data, &d) == nil && match(d) {
				found = true
				return jetstream.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read audit events: %v", err)
		}
		return found
	}, 200*time.Millisecond)
}

// Requests without a valid token are refused with 401: none, garbage, a well-formed
// token never issued, a revoked one, and one that has expired.
func TestAuthRefusesBadTokens(t *testing.T) {
	ctx := testContext(t)
	ws := "authz-tokens"
	ensureWorkspace(t, ctx, ws)
	unknown, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	revoked := tokenClient(t, ctx, "authz-revoked", ws, api.RoleMember, time.Hour)
	if _, err := revoked.Whoami(ctx); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	if err := env.api.RevokeToken(ctx, "authz-revoked"); err != nil {
		t.Fatal(err)
	}
	clients := map[string]*dlc.Client{"revoked": revoked}
	for name, tok := range map[string]string{"none": "", "garbage": "letmein", "unknown": unknown, "admin token altered": env.e.AdminToken[:len(env.e.AdminToken)-2] + "AA"} {
		c, err := dlc.New(env.e.APIURL, dlc.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			_, err := c.ListJobs(ctx, ws, dlc.ListOptions{})
			var apiErr *dlc.Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || apiErr.API.Code != api.CodeUnauthenticated {
				t.Errorf("list jobs: %v, want 401 Unauthenticated", err)
			}
			if _, err := c.SubmitJob(ctx, jobDoc(ws, "bad-token", "true")); !dlc.IsUnauthenticated(err) {
				t.Errorf("submit: %v, want 401", err)
			}
			if err := c.Health(ctx); err != nil {
				t.Errorf("health needs no token: %v", err)
			}
		})
	}
	if _, err := env.api.GetJob(ctx, ws, "bad-token"); !dlc.IsNotFound(err) {
		t.Errorf("a refused submit created a job: %v", err)
	}

	// A token past its expiry: the shortest TTL the API accepts is one second.
	expiring := tokenClient(t, ctx, "authz-expiring", ws, api.RoleViewer, time.Second)
	var apiErr *dlc.Error
	testutil.Eventually(t, itest.Left(ctx), "the token to expire", func() bool {
		_, err := expiring.Whoami(ctx)
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
			return true
		}
		if err != nil {
			t.Fatalf("expiring token: %v", err)
		}
		return false
	}, itest.PollInterval)
	if !strings.Contains(apiErr.API.Message, "expired") {
		t.Errorf("expired token: %q, want a message saying it expired", apiErr.API.Message)
	}
}

// Malformed and oversized bodies get a 4xx naming the fields at fault, and create
// nothing: the workspace's list stays empty.
func TestAuthMalformedBodiesCreateNothing(t *testing.T) {
	// Valid tokens only (403 and 404 spend no failed-authentication budget): it can
	// share the stack with the other parallel tests.
	t.Parallel()
	ctx := testContext(t)
	ws := "authz-bodies"
	ensureWorkspace(t, ctx, ws)
	member := tokenClient(t, ctx, "authz-bodies-member", ws, api.RoleMember, time.Hour)
	valid := string(jobDoc(ws, "ok", "true"))
	huge := valid + "# " + strings.Repeat("x", 1<<20) + "\n"
	tests := map[string]struct {
		body   string
		status int
		fields []string
	}{
		"oversized": {body: huge, status: http.StatusRequestEntityTooLarge, fields: []string{"body"}},
		"truncated JSON": {body: `{"apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "x"`,
			status: http.StatusBadRequest, fields: []string{"body"}},
		"not a document": {body: "- just\n- a list\n", status: http.StatusBadRequest, fields: []string{"body"}},
		"wrong types and unknown fields": {body: fmt.Sprintf(`{"apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob",
			"metadata": {"name": "x", "workspace": %q}, "spec": {"framework": "custom", "command": ["true"],
			"roles": {"worker": {"replicas": "two"}}, "colour": "blue"}}`, ws),
			status: http.StatusUnprocessableEntity, fields: []string{"spec.colour", "spec.roles.worker.replicas"}},
		"invalid values": {body: fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: Bad_Name, workspace: %s}
spec: {framework: custom, command: ["true"], roles: {worker: {replicas: 0}}}
`, ws), status: http.StatusUnprocessableEntity, fields: []string{"metadata.name", "spec.roles.worker.replicas"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := member.SubmitJob(ctx, []byte(tt.body))
			var apiErr *dlc.Error
			if !errors.As(err, &apiErr) || apiErr.Status != tt.status {
				t.Fatalf("submit: %v, want %d", err, tt.status)
			}
			var fields []string
			for _, d := range apiErr.API.Details {
				fields = append(fields, d.Field)
			}
			for _, f := range tt.fields {
				if !slices.Contains(fields, f) {
					t.Errorf("details %+v lack field %s", apiErr.API.Details, f)
				}
			}
		})
	}
	// Small JSON requests name their fields too.
	_, err := env.api.CreateToken(ctx, api.TokenRequest{Name: "x", Workspace: ws, Role: api.RoleViewer, TTL: schemas.Duration(-time.Second)})
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || len(apiErr.API.Details) != 1 || apiErr.API.Details[0].Field != "ttl" {
		t.Errorf("token with a negative ttl: %v, want 422 naming ttl", err)
	}
	_, err = member.CloneJob(ctx, ws, "ok", "", nil)
	if !errors.As(err, &apiErr) || apiErr.Status/100 != 4 {
		t.Errorf("clone without a name: %v, want a 4xx", err)
	}

	l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("refused bodies created %d job(s): %+v", len(l.Items), l.Items)
	}
}
