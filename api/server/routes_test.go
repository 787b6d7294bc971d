package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/service"
)

func jobSpec(ws string) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: j1, workspace: %s}
spec:
  framework: custom
  command: ["true"]
  roles: {worker: {replicas: 1}}
`, ws)
}

func ruleSpec(ws string) []byte {
	return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: r1, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1]}
  subject: dlc.%s.notify.r1
`, ws, ws)
}

// bodyFor is a request body for a route: a spec naming ws for the routes that take one,
// an empty JSON object otherwise.
func bodyFor(rt *route, ws string) []byte {
	switch rt.pattern() {
	case "POST /v1/jobs", "POST /v1/validate":
		return jobSpec(ws)
	case "POST /v1/notificationrules":
		return ruleSpec(ws)
	}
	if rt.method == http.MethodGet || rt.method == http.MethodDelete {
		return nil
	}
	return []byte("{}")
}

func concretePath(rt *route, ws string) string {
	return strings.NewReplacer("{ws}", ws, "{name}", "x", "{trial}", "0", "{kind}", "TrainingJob", "{uid}", testUID).Replace(rt.path)
}

func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Errorf("error body %q is not {error: {code, message}}", body)
	}
	return eb.Error.Code
}

// Every route of the table authenticates and authorizes before it acts: without a
// token, or with a bad one, it answers 401; a viewer of workspace alpha gets 404 for
// anything in workspace beta (as if nothing were there), 403 for a document naming
// beta, and 403 for any change in alpha. Temporal (a fake that panics on all but
// ExecuteWorkflow) and the rule store (empty) are never reached.
func TestEveryRouteAuthorizes(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	viewer := authn.token(t, "alpha-viewer", "alpha", api.RoleViewer)
	member := authn.token(t, "alpha-member", "alpha", api.RoleMember)
	unknown := authn.token(t, "x", "alpha", api.RoleAdmin)
	delete(authn, unknown)
	h := testServerWith(tc, authn, service.Config{Rules: &notify.Store{}, Redriver: &notify.Redriver{}}).Handler()
	for i := range routes {
		rt := &routes[i]
		if rt.public {
			continue
		}
		t.Run(rt.pattern(), func(t *testing.T) {
			for name, tok := range map[string]string{"no token": "", "unknown token": unknown, "malformed token": "dlc_nope"} {
				rec := call(h, rt.method, concretePath(rt, "alpha"), tok, bodyFor(rt, "alpha"))
				if rec.Code != http.StatusUnauthorized || errorCode(t, rec.Body.Bytes()) != api.CodeUnauthenticated {
					t.Errorf("%s: %d %s, want 401 Unauthenticated", name, rec.Code, rec.Body)
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s: no WWW-Authenticate header", name)
				}
			}

			rec := call(h, rt.method, concretePath(rt, "beta"), viewer, bodyFor(rt, "beta"))
			switch {
			case strings.Contains(rt.path, "{ws}"):
				if rec.Code != http.StatusNotFound || errorCode(t, rec.Body.Bytes()) != api.CodeNotFound {
					t.Errorf("another workspace's %s: %d %s, want 404 NotFound", rt.path, rec.Code, rec.Body)
				}
			case rt.mutating():
				if rec.Code != http.StatusForbidden || errorCode(t, rec.Body.Bytes()) != api.CodePermissionDenied {
					t.Errorf("a viewer of alpha changing beta: %d %s, want 403", rec.Code, rec.Body)
				}
			}
			if rt.mutating() {
				rec := call(h, rt.method, concretePath(rt, "alpha"), viewer, bodyFor(rt, "alpha"))
				if rec.Code != http.StatusForbidden || errorCode(t, rec.Body.Bytes()) != api.CodePermissionDenied {
					t.Errorf("a viewer changing its own workspace: %d %s, want 403", rec.Code, rec.Body)
				}
				if rt.pattern() == "POST /v1/jobs" || rt.pattern() == "POST /v1/notificationrules" {
					rec := call(h, rt.method, rt.path, member, bodyFor(rt, "beta"))
					if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "metadata.workspace") {
						t.Errorf("a member of alpha submitting into beta: %d %s, want 403 naming metadata.workspace", rec.Code, rec.Body)
					}
				}
			}
		})
	}
	if n := tc.starts(); n != 0 {
		t.Errorf("%d workflows started by refused requests", n)
	}
}

// A member submits into its own workspace; a spec for the job reaches Temporal once.
func TestMemberSubmitsInOwnWorkspace(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	member := authn.token(t, "alpha-member", "alpha", api.RoleMember)
	h := testServer(tc, authn).Handler()
	rec := call(h, "POST", "/v1/jobs", member, jobSpec("alpha"))
	if rec.Code != http.StatusCreated || tc.starts() != 1 {
		t.Fatalf("submit: %d %s; %d starts", rec.Code, rec.Body, tc.starts())
	}
	if id := tc.last.ID; !strings.Contains(id, "alpha") {
		t.Errorf("workflow id %q", id)
	}
}

// Unknown routes and methods answer in the API's error shape.
func TestUnmatchedRoutes(t *testing.T) {
	h := testServer(nil, fakeAuth{}).Handler()
	tests := map[string]struct {
		method, path string
		status       int
		code         string
	}{
		"unknown path":   {"GET", "/v2/nothing", http.StatusNotFound, api.CodeNotFound},
		"wrong method":   {"PATCH", "/v1/jobs", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed},
		"health is open": {"GET", "/healthz", http.StatusOK, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rec := call(h, tt.method, tt.path, "", nil)
			if rec.Code != tt.status {
				t.Fatalf("%s %s: %d %s", tt.method, tt.path, rec.Code, rec.Body)
			}
			if tt.code != "" && errorCode(t, rec.Body.Bytes()) != tt.code {
				t.Errorf("code: %s", rec.Body)
			}
			if rec.Header().Get("X-Request-Id") == "" {
				t.Errorf("no X-Request-Id")
			}
		})
	}
}

// A mutating call is audited (refused or not) with who, what, from where and the
// outcome, under a message id derived from the request id; reads are not.
func TestAuditRecords(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	member := authn.token(t, "alpha-member", "alpha", api.RoleMember)
	pub := &recordingPublisher{sent: make(chan struct{}, 8)}
	s := testServer(tc, authn)
	s.auditPub = pub
	h := s.Handler()

	ok := call(h, "POST", "/v1/jobs", member, jobSpec("alpha"))
	<-pub.sent
	denied := call(h, "POST", "/v1/workspaces/beta/jobs/x/stop", member, nil)
	<-pub.sent
	anon := call(h, "DELETE", "/v1/workspaces/alpha/jobs/x", "", nil)
	<-pub.sent
	call(h, "GET", "/v1/whoami", member, nil)

	type want struct {
		subject, actor, route, object string
		status                        int
		rec                           interface{ Header() http.Header }
	}
	wants := []want{
		{"dlc.alpha.audit", "alpha-member", "POST /v1/jobs", "job alpha/j1", http.StatusCreated, ok},
		{"dlc.beta.audit", "alpha-member", "POST /v1/workspaces/{ws}/jobs/{name}/stop", "job beta/x", http.StatusNotFound, denied},
		{"dlc.alpha.audit", "anonymous", "DELETE /v1/workspaces/{ws}/jobs/{name}", "", http.StatusUnauthorized, anon},
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.msgs) != len(wants) {
		t.Fatalf("%d audit events, want %d", len(pub.msgs), len(wants))
	}
	for i, w := range wants {
		m := pub.msgs[i]
		var ev struct {
			ID   string
			Type string
			Data struct {
				RequestID, Actor, Route, Object, RemoteAddr string
				Status                                      int
			}
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		d := ev.Data
		reqID := w.rec.Header().Get("X-Request-Id")
		if m.Subject != w.subject || m.ID != "audit:"+reqID || ev.ID != m.ID || ev.Type != "opendlc.audit.v1" ||
			d.Actor != w.actor || d.Route != w.route || d.Object != w.object || d.Status != w.status ||
			d.RequestID != reqID || d.RemoteAddr == "" {
			t.Errorf("audit event %d = %s %s %+v, want %+v", i, m.Subject, m.ID, ev, w)
		}
		if strings.Contains(string(m.Data), "dlc_") {
			t.Errorf("audit event %d holds a token: %s", i, m.Data)
		}
	}
}
