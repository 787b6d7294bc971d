package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/service"
)

// fakeTemporal answers ExecuteWorkflow and nothing else: any other call panics (the
// embedded interface is nil), which is how the tests notice a handler that reaches
// Temporal when it should have refused the request.
type fakeTemporal struct {
	client.Client
	mu   sync.Mutex
	n    int
	last client.StartWorkflowOptions
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.last = opts
	return fakeRun{id: opts.ID}, nil
}

func (f *fakeTemporal) starts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

type fakeRun struct {
	client.WorkflowRun
	id string
}

func (r fakeRun) GetID() string    { return r.id }
func (r fakeRun) GetRunID() string { return "run-" + r.id }

// fakeAuth knows a fixed set of tokens.
type fakeAuth map[string]api.Identity

func (f fakeAuth) Authenticate(_ context.Context, token string) (api.Identity, error) {
	if _, err := auth.ParseToken(token); err != nil {
		return api.Identity{}, err
	}
	id, ok := f[token]
	if !ok {
		return api.Identity{}, auth.ErrUnknownToken
	}
	return id, nil
}

// token adds an identity and returns its token.
func (f fakeAuth) token(t testing.TB, name, ws string, role api.Role) string {
	t.Helper()
	tok, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	f[tok] = api.Identity{Name: name, Workspace: ws, Role: role}
	return tok
}

// recordingPublisher keeps the audit events published.
type recordingPublisher struct {
	mu   sync.Mutex
	msgs []events.Msg
	sent chan struct{}
}

func (p *recordingPublisher) Publish(_ context.Context, msgs ...events.Msg) error {
	p.mu.Lock()
	p.msgs = append(p.msgs, msgs...)
	p.mu.Unlock()
	if p.sent != nil {
		p.sent <- struct{}{}
	}
	return nil
}

// testServer is a Server with the fakes, serving every route of the table.
func testServer(tc *fakeTemporal, authn fakeAuth, opts ...Option) *Server {
	return testServerWith(tc, authn, service.Config{}, opts...)
}

// testServerWith is testServer in front of services composed with sc's stores (its
// Temporal is tc).
func testServerWith(tc *fakeTemporal, authn fakeAuth, sc service.Config, opts ...Option) *Server {
	// The tests send many bad tokens from httptest's one address: the abuse limits
	// (ratelimit_test.go tests them) would answer 429.
	unlimited := WithRateLimits(RateLimits{AuthBurst: 1 << 30, AuditBurst: 1 << 30})
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), unlimited}, opts...)
	var c client.Client
	if tc != nil {
		c = tc
	}
	sc.Temporal = c
	s := New(service.Compose(context.Background(), sc), nil, opts...)
	s.authn = authn
	return s
}

// call sends one request to h and returns the recorded answer.
func call(h http.Handler, method, path, token string, body []byte) *httptest.ResponseRecorder {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
