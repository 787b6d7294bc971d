package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/workflows"
)

// The routes the console reads through: a workspace's audit records
// (GET /v1/workspaces/{ws}/audit) and the node self-healing workflow's state
// (GET /v1/node-healer).

// errorField returns the field an error answer names.
func errorField(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error api.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(e.Error.Details) == 0 {
		return ""
	}
	return e.Error.Details[0].Field
}

// The audit records are for those who may manage the workspace's tokens: a workspace
// admin of it, or an admin. A member or viewer is refused 403, another workspace's
// token gets the API's 404 for a workspace it cannot see; bad since and limit values
// answer 400 naming the parameter. (The server has no JetStream: an allowed call
// answers 503, the feature's answer; the parameters are checked on one whose service
// has an audit reader, which a refused call never reaches.)
func TestWorkspaceAuditAuthorization(t *testing.T) {
	authn := fakeAuth{}
	member := authn.token(t, "m", "a", api.RoleMember)
	viewer := authn.token(t, "v", "a", api.RoleViewer)
	wsAdmin := authn.token(t, "wa", "a", api.RoleWorkspaceAdmin)
	otherAdmin := authn.token(t, "wb", "b", api.RoleWorkspaceAdmin)
	admin := authn.token(t, "root", api.AllWorkspaces, api.RoleAdmin)
	h := testServer(&fakeTemporal{}, authn).Handler()
	withAudit := testServer(&fakeTemporal{}, authn)
	withAudit.svc.Audit = service.NewAudit(nil)
	checksParams := withAudit.Handler()
	for _, tc := range []struct {
		name, token, query string
		want               int
		field              string
	}{
		{"member", member, "", http.StatusForbidden, ""},
		{"viewer", viewer, "", http.StatusForbidden, ""},
		{"member within bounds", member, "?limit=50&since=1h", http.StatusForbidden, ""},
		{"another workspace's admin", otherAdmin, "", http.StatusNotFound, ""},
		{"no token", "", "", http.StatusUnauthorized, ""},
		{"workspace admin", wsAdmin, "", http.StatusServiceUnavailable, ""},
		{"admin", admin, "?since=24h&limit=1", http.StatusServiceUnavailable, ""},
		{"limit not a number", wsAdmin, "?limit=many", http.StatusBadRequest, "limit"},
		{"limit zero", wsAdmin, "?limit=0", http.StatusBadRequest, "limit"},
		{"limit over 50", wsAdmin, "?limit=51", http.StatusBadRequest, "limit"},
		{"since not a duration", wsAdmin, "?since=yesterday", http.StatusBadRequest, "since"},
		{"since negative", wsAdmin, "?since=-1h", http.StatusBadRequest, "since"},
		{"since zero", wsAdmin, "?since=0s", http.StatusBadRequest, "since"},
		{"since over 7 days", wsAdmin, "?since=169h", http.StatusBadRequest, "since"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handler := h
			if tc.field != "" {
				handler = checksParams
			}
			rec := call(handler, "GET", "/v1/workspaces/a/audit"+tc.query, tc.token, nil)
			if rec.Code != tc.want {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if tc.field != "" {
				if f := errorField(t, rec.Body.String()); f != tc.field {
					t.Fatalf("the 400 names %q, want %q: %s", f, tc.field, rec.Body)
				}
			}
		})
	}
	// The records of calls that concern no workspace (tokens, the registry) are the
	// reserved workspace system's: an admin's alone.
	if rec := call(h, "GET", "/v1/workspaces/system/audit", admin, nil); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("admin, system: %d %s, want 503 (allowed, no JetStream)", rec.Code, rec.Body)
	}
	if rec := call(h, "GET", "/v1/workspaces/system/audit", wsAdmin, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("workspace admin, system: %d %s, want 404", rec.Code, rec.Body)
	}
}

// healerTemporal answers the node self-healing workflow's query: state, or NotFound
// when state is nil (the workflow is not running).
type healerTemporal struct {
	fakeTemporal
	state *workflows.NodeHealthState
}

func (f *healerTemporal) QueryWorkflow(_ context.Context, id, _, query string, _ ...any) (converter.EncodedValue, error) {
	if id != workflows.NodeHealthWorkflowID || query != workflows.QueryNodeHealth {
		return nil, serviceerror.NewInvalidArgument("unexpected query " + query + " of " + id)
	}
	if f.state == nil {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(*f.state)
	if err != nil {
		return nil, err
	}
	return client.NewValue(p), nil
}

// newTestServer is testServer over any Temporal client and a JetStream client.
func newTestServer(tc client.Client, ev *jetstream.Client, authn fakeAuth) *Server {
	s := New(service.Compose(context.Background(), service.Config{Temporal: tc, Events: ev}), ev, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithRateLimits(RateLimits{AuthBurst: 1 << 30, AuditBurst: 1 << 30}))
	s.authn = authn
	return s
}

// Only a cluster administrator (the admin role with a token of every workspace) reads
// the self-healing workflow's state; a workflow that is not running answers 200 with
// running false. GET /v1/nodes/healer stays a node's route.
func TestNodeHealer(t *testing.T) {
	authn := fakeAuth{}
	admin := authn.token(t, "root", api.AllWorkspaces, api.RoleAdmin)
	reader := authn.token(t, "ops", api.AllWorkspaces, api.RoleViewer)
	wsAdmin := authn.token(t, "wa", "a", api.RoleWorkspaceAdmin)
	wsRoot := authn.token(t, "aroot", "a", api.RoleAdmin)
	tc := &healerTemporal{}
	h := newTestServer(tc, nil, authn).Handler()

	for name, tok := range map[string]string{"viewer of every workspace": reader, "workspace admin": wsAdmin, "admin of one workspace": wsRoot} {
		if rec := call(h, "GET", "/v1/node-healer", tok, nil); rec.Code != http.StatusForbidden {
			t.Fatalf("%s: %d %s, want 403", name, rec.Code, rec.Body)
		}
	}
	if rec := call(h, "GET", "/v1/node-healer", "", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s, want 401", rec.Code, rec.Body)
	}

	rec := call(h, "GET", "/v1/node-healer", admin, nil)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"running":false,"rounds":0,"released":0}` {
		t.Fatalf("not running: %d %s", rec.Code, rec.Body)
	}

	round := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := round.Add(-time.Hour)
	tc.state = &workflows.NodeHealthState{Interval: 5 * time.Minute, Rounds: 7, Released: 2, LastRound: &round, LastError: "one probe timed out",
		LastNodes: []backend.NodeHealth{{Node: "gpu-1", Reason: backend.ReasonProbeFailed, Message: "1 of 8 GPUs answer", CheckedAt: round,
			Quarantined: true, QuarantinedAt: &since, Checks: []events.HealthCheck{{Name: backend.CheckGPUs, Message: "1 of 8 GPUs answer"}}}}}
	rec = call(h, "GET", "/v1/node-healer", admin, nil)
	var got api.NodeHealer
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
		t.Fatalf("running: %d %s", rec.Code, rec.Body)
	}
	if !got.Running || got.Interval != "5m0s" || got.ProbeTimeout != "" || got.Rounds != 7 || got.Released != 2 || !got.LastRound.Equal(round) ||
		got.LastError != "one probe timed out" || len(got.LastNodes) != 1 {
		t.Fatalf("state %+v", got)
	}
	n := got.LastNodes[0]
	if n.Node != "gpu-1" || n.Healthy || n.Reason != backend.ReasonProbeFailed || !n.Quarantined || !n.QuarantinedAt.Equal(since) ||
		len(n.Checks) != 1 || n.Checks[0].Name != backend.CheckGPUs || n.Checks[0].OK {
		t.Fatalf("re-check %+v", n)
	}

	// The literal route does not shadow a node named healer: that is GET /v1/nodes/healer
	// (which reads the node-health verdicts; this server has none and no JetStream, so
	// the answer is the node's 404 from the self-healing workflow's latest round).
	tc.state = &workflows.NodeHealthState{}
	if rec := call(h, "GET", "/v1/nodes/healer", admin, nil); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "node healer") {
		t.Fatalf("GET /v1/nodes/healer: %d %s, want the node's 404", rec.Code, rec.Body)
	}
}

// The records are read from the audit stream: the workspace's own, newest first, at
// most limit; a refused mutating call is there, and reading the records is not
// audited.
func TestWorkspaceAuditReadsTheAuditStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	js, err := jetstream.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Close)
	if err := js.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	authn := fakeAuth{}
	member := authn.token(t, "m", "a", api.RoleMember)
	wsAdmin := authn.token(t, "wa", "a", api.RoleWorkspaceAdmin)
	h := newTestServer(&fakeTemporal{}, js, authn).Handler()

	publish := func(ws, id, actor string) {
		t.Helper()
		ev, err := events.New("audit:"+id, events.TypeAudit, ws, events.AuditSource, events.AuditSubject(ws), time.Now(),
			events.AuditData{RequestID: id, Actor: actor, Method: "POST", Path: "/v1/jobs", Status: 201})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(ev)
		if err := js.Publish(ctx, events.Msg{Subject: events.AuditSubject(ws), ID: ev.ID, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	publish("a", "r1", "first")
	publish("b", "r2", "of-b")
	publish("a", "r3", "second")
	// A refused mutating call, audited by the server (published after the answer).
	if rec := call(h, "PUT", "/v1/workspaces/a/quota", member, []byte(`{"gpu":"1"}`)); rec.Code != http.StatusForbidden {
		t.Fatalf("a member's quota: %d %s, want 403", rec.Code, rec.Body)
	}

	read := func(query string) api.AuditList {
		t.Helper()
		rec := call(h, "GET", "/v1/workspaces/a/audit"+query, wsAdmin, nil)
		var l api.AuditList
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &l) != nil {
			t.Fatalf("GET audit%s: %d %s", query, rec.Code, rec.Body)
		}
		return l
	}
	var l api.AuditList
	testutil.Eventually(t, 30*time.Second, "three audit records", func() bool {
		l = read("")
		return len(l.Items) >= 3
	}, 100*time.Millisecond)
	actors := func(l api.AuditList) string {
		var out []string
		for _, r := range l.Items {
			out = append(out, r.Actor)
		}
		return strings.Join(out, ",")
	}
	if got := actors(l); got != "m,second,first" {
		t.Fatalf("audit records of a: %s, want m,second,first: %+v", got, l.Items)
	}
	if r := l.Items[0]; r.Status != http.StatusForbidden || r.Method != "PUT" || r.Route != "PUT /v1/workspaces/{ws}/quota" || r.ID == "" || r.Time.IsZero() {
		t.Fatalf("the refused call's record %+v", r)
	}
	if got := actors(read("?limit=2&since=1h")); got != "m,second" {
		t.Fatalf("limit=2: %s, want m,second", got)
	}
	// The reads above were not audited: no record of them turns up.
	testutil.Consistently(t, 500*time.Millisecond, "the reads are not audited", func() error {
		if got := actors(read("")); got != "m,second,first" {
			return fmt.Errorf("after the reads: %s, want m,second,first", got)
		}
		return nil
	}, 100*time.Millisecond)
}
