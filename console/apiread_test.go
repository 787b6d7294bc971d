package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
)

// readsAPI answers the routes of the workspace and nodes pages, and records the audit
// and node-healer calls it was asked: the console reads both through the API, with the
// session's token.
type readsAPI struct {
	mu      sync.Mutex
	calls   []string
	running bool
	// quota is the workspace's quota status (none set: an empty one).
	quota *api.QuotaStatus
}

var readsTokens = map[string]api.Identity{
	"tok-wa":   {Name: "lead", Workspace: "a", Role: api.RoleWorkspaceAdmin},
	"tok-m":    {Name: "dev", Workspace: "a", Role: api.RoleMember},
	"tok-root": {Name: "root", Workspace: api.AllWorkspaces, Role: api.RoleAdmin},
	"tok-v":    {Name: "val", Workspace: "a", Role: api.RoleViewer},
}

func (f *readsAPI) record(r *http.Request, who api.Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, who.Name+" "+r.URL.Path+"?"+r.URL.RawQuery)
}

func (f *readsAPI) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *readsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, ok := readsTokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		writeAPIError(w, http.StatusUnauthorized, "invalid token")
		return
	}
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/whoami", func(http.ResponseWriter, *http.Request) { answer(who) })
	mux.HandleFunc("GET /v1/workspaces/{ws}", func(_ http.ResponseWriter, r *http.Request) {
		answer(api.Workspace{Name: r.PathValue("ws"), Namespace: r.PathValue("ws")})
	})
	mux.HandleFunc("GET /v1/workspaces/{ws}/quota", func(http.ResponseWriter, *http.Request) {
		if f.quota != nil {
			answer(f.quota)
			return
		}
		answer(api.QuotaStatus{})
	})
	mux.HandleFunc("POST /v1/workspaces/{ws}/jobs/{name}/priority", func(w http.ResponseWriter, r *http.Request) {
		var p api.JobPriority
		_ = json.NewDecoder(r.Body).Decode(&p)
		f.record(r, who)
		f.mu.Lock()
		f.calls[len(f.calls)-1] += fmt.Sprintf(" priority=%d", p.Priority)
		f.mu.Unlock()
		if who.Role == api.RoleViewer {
			writeAPIError(w, http.StatusForbidden, "role viewer may not submit, change or delete here")
			return
		}
		answer(p)
	})
	mux.HandleFunc("GET /v1/tokens", func(http.ResponseWriter, *http.Request) { answer(api.TokenList{}) })
	mux.HandleFunc("GET /v1/workspaces/{ws}/audit", func(_ http.ResponseWriter, r *http.Request) {
		f.record(r, who)
		answer(api.AuditList{Items: []api.AuditRecord{{ID: "audit:r2", Time: time.Now(),
			AuditData: events.AuditData{Actor: "dev", ActorRole: "member", Method: "POST", Path: "/v1/jobs", Object: "job a/x", Status: 201}}}})
	})
	mux.HandleFunc("GET /v1/workspaces/{ws}/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
	})
	mux.HandleFunc("GET /v1/node-healer", func(_ http.ResponseWriter, r *http.Request) {
		f.record(r, who)
		if !f.running {
			answer(api.NodeHealer{})
			return
		}
		round := time.Now()
		answer(api.NodeHealer{Running: true, Rounds: 12, Released: 3, LastRound: &round,
			LastNodes: []api.NodeRecheck{{Node: "gpu-7", Reason: "ProbeFailed", Message: "GPU 3 lost", CheckedAt: round, Quarantined: true}}})
	})
	mux.ServeHTTP(w, r)
}

// page signs in with token and returns the body of the console page at path.
func (f *readsAPI) page(t *testing.T, token, path string) string {
	t.Helper()
	srv := httptest.NewServer(Mount(f, Options{}))
	defer srv.Close()
	c := browserish(t)
	resp, err := c.Get(srv.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	m := csrfInput.FindStringSubmatch(readAll(t, resp))
	if m == nil {
		t.Fatal("no CSRF field on the sign-in page")
	}
	if resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"csrf": {m[1]}, "token": {token}}); err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp, err = c.Get(srv.URL + path); err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

func TestWorkspacePageReadsAuditThroughTheAPI(t *testing.T) {
	f := &readsAPI{}
	body := f.page(t, "tok-wa", "/ui/ws/a/workspace")
	if !strings.Contains(body, `id="audit"`) || !strings.Contains(body, `data-actor="dev"`) || !strings.Contains(body, "POST /v1/jobs") {
		t.Fatalf("the workspace admin's page shows no audit records: %s", body)
	}
	if got := strings.Join(f.recorded(), "; "); got != "lead /v1/workspaces/a/audit?limit=50&since=168h0m0s" {
		t.Fatalf("audit calls %q", got)
	}
	// A member is not shown them, and the console does not ask.
	f = &readsAPI{}
	if body := f.page(t, "tok-m", "/ui/ws/a/workspace"); strings.Contains(body, `id="audit"`) {
		t.Fatalf("a member's page shows the audit section: %s", body)
	}
	if got := f.recorded(); len(got) != 0 {
		t.Fatalf("a member's page asked %q", got)
	}
}

func TestNodesPageReadsTheHealerThroughTheAPI(t *testing.T) {
	f := &readsAPI{}
	if body := f.page(t, "tok-root", "/ui/ws/a/nodes"); !strings.Contains(body, "The self-healing workflow is not running") {
		t.Fatalf("not running: %s", body)
	}
	f.running = true
	body := f.page(t, "tok-root", "/ui/ws/a/nodes")
	if !strings.Contains(body, "<dd>12</dd>") || !strings.Contains(body, "gpu-7") || !strings.Contains(body, "GPU 3 lost") {
		t.Fatalf("running: %s", body)
	}
	if got := strings.Join(f.recorded(), "; "); got != "root /v1/node-healer?; root /v1/node-healer?" {
		t.Fatalf("healer calls %q", got)
	}
}
