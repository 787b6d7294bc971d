package itest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// The validating transport passes what the document allows and names the operation of
// what it does not: a wrong answer, an unlisted status, a bad streamed line, a refused
// request the server accepted.
func TestOpenAPITransport(t *testing.T) {
	v, err := NewOpenAPIValidator(filepath.Join(Root(), "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		case "/v1/whoami":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"bogus":1}`)
		case "/v1/nodes":
			w.WriteHeader(http.StatusTeapot)
		case "/v1/workspaces/alpha/events":
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, "{\"nope\":true}\n")
		case "/v1/workspaces/alpha/jobs/j/logs":
			// Two good lines, one whose time is no date-time, and one good line again.
			w.Header().Set("Content-Type", "application/x-ndjson")
			for _, tm := range []string{"2026-01-01T00:00:00Z", "2026-01-01T00:00:01.5Z", "yesterday", "2026-01-01T00:00:02Z"} {
				_, _ = io.WriteString(w, `{"workspace":"alpha","job":"j","uid":"u","attempt":1,"role":"worker","index":0,`+
					`"replica":"j-worker-0","stream":"stdout","seq":1,"time":"`+tm+`","line":"hello"}`+"\n")
			}
		case "/v1/workspaces":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"name":"alpha"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: v.Transport(http.DefaultTransport)}
	for _, call := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/v1/whoami", ""},
		{"GET", "/v1/nodes", ""},
		{"GET", "/v1/workspaces/alpha/events", ""},
		{"GET", "/v1/workspaces/alpha/jobs/j/logs", ""},
		{"POST", "/v1/workspaces", `{"name":"alpha","createdAt":"2026-01-01T00:00:00Z"}`},
		{"GET", "/elsewhere/object", ""},
	} {
		req, err := http.NewRequest(call.method, srv.URL+call.path, strings.NewReader(call.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	problems := strings.Join(v.Problems(), "\n")
	for _, want := range []string{"whoami (GET /v1/whoami): answer 200", "listNodes (GET /v1/nodes): status 418 is not listed",
		"workspaceEvents (GET /v1/workspaces/alpha/events): streamed line",
		`jobLogs (GET /v1/workspaces/alpha/jobs/j/logs): streamed line {"workspace":"alpha","job":"j","uid":"u","attempt":1,"role":"worker","index":0,"replica":"j-worker-0","stream":"stdout","seq":1,"time":"yesterday"`,
		`at '/time': 'yesterday' is not valid date-time`, "createWorkspace (POST /v1/workspaces): the server answered 201 to a request the document refuses"} {
		if !strings.Contains(problems, want) {
			t.Errorf("no problem %q in:\n%s", want, problems)
		}
	}
	if strings.Contains(problems, "health") || strings.Contains(problems, "elsewhere") {
		t.Errorf("problems of valid or foreign calls:\n%s", problems)
	}
	if n := len(v.Problems()); n != 6 { // 418 also has no Content-Type; one log line is bad
		t.Errorf("%d problems:\n%s", n, problems)
	}
}
