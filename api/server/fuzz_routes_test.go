package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// fuzzTemporal is a Temporal client that the fuzzed handlers may reach only after they
// accepted a body: every call panics (the embedded interface is nil), and the fuzz
// target takes a panic inside it as "the body was accepted and reached Temporal".
type fuzzTemporal struct{ client.Client }

// bodyRoutes are the routes of the table that read a request body, as "METHOD path"
// with the path parameters filled in.
func bodyRoutes(s *Server) []string {
	var out []string
	for _, rt := range routes {
		if rt.request == nil || !rt.served(s) {
			continue
		}
		path := strings.NewReplacer("{ws}", "default", "{name}", "fuzz").Replace(rt.path)
		out = append(out, rt.method+" "+path)
	}
	return out
}

// FuzzRouteBodies sends arbitrary bodies to every route that reads one, as an admin,
// through the whole handler (authentication, body limit, decoding, validation,
// authorization). Whatever the body: the answer is a success or a 4xx in the API's
// error shape (field details for 400 and 422), never a 5xx and never a panic, unless
// the handler accepted the body and went on to the backend (Temporal or the token
// store, which this in-process server does not have).
func FuzzRouteBodies(f *testing.F) {
	authn := fakeAuth{}
	admin := authn.token(f, "fuzz-admin", "*", api.RoleAdmin)
	s := New(service.Compose(context.Background(), service.Config{Temporal: fuzzTemporal{}}), nil, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithMaxBodySize(64<<10),
		WithRateLimits(RateLimits{AuthBurst: 1 << 30, AuditBurst: 1 << 30}))
	s.authn = authn
	// Token and workspace services without a store: the handlers decode and check the
	// body, then reach the absent store (a panic that callGuarded recognises).
	s.svc.Tokens = service.NewTokens(nil)
	s.svc.Workspaces = service.NewWorkspaces(nil, s.svc)
	s.svc.Triggers = service.NewTriggers(discardTriggers{})
	s.svc.Templates = service.NewPipelineTemplates(discardTemplates{}, s.svc.Pipelines)
	h := s.Handler()
	targets := bodyRoutes(s)
	if len(targets) < 15 {
		f.Fatalf("only %d routes with a body: %v", len(targets), targets)
	}
	seeds := []string{`{}`, ``, `{"reason": "x"}`, `{"name": "ci", "workspace": "default", "role": "member"}`,
		`{"name": "default", "namespace": "dlc-default"}`, `{"gpus": 4, "cpus": "x"}`, `{"from": "2026-01-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"}`,
		`{"overrides": {"spec": {"roles": null}}}`, `{"paused": true}`, `{"maxTrials": -1}`, `{`, `[]`, `null`, "a: &a [*a]"}
	for _, name := range []string{"valid.yaml", "minimal.json", "five-mistakes.yaml", "notificationrule-valid.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "schemas", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	for _, ex := range []string{"experiment/tune.yaml", "schedule/nightly.yaml", "pipeline/retrain.yaml", "trigger/on-new-data.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", ex))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	for i := range targets {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		method, path, _ := strings.Cut(targets[int(route)%len(targets)], " ")
		rec, reached := callGuarded(t, h, method, path, admin, body)
		if reached {
			return
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusNoContent {
			return
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: %d with content type %q", method, path, rec.Code, ct)
		}
		if rec.Code < 400 {
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %s: %d body is not JSON: %q", method, path, rec.Code, rec.Body)
			}
			return
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %s: %d body %q is not the error shape (%v)", method, path, rec.Code, rec.Body, err)
		}
		if (rec.Code == http.StatusBadRequest || rec.Code == http.StatusUnprocessableEntity) && len(eb.Error.Details) == 0 {
			t.Fatalf("%s %s: %d without field details: %s", method, path, rec.Code, rec.Body)
		}
	})
}

// callGuarded calls the handler; reached reports a panic inside the fake Temporal
// client or the absent token store, which means the body was accepted. Any other
// panic fails the test.
func callGuarded(t *testing.T, h http.Handler, method, path, token string, body []byte) (rec *httptest.ResponseRecorder, reached bool) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			stack := string(debug.Stack())
			if strings.Contains(stack, "server.(*fuzzTemporal).") || strings.Contains(stack, "auth.(*Store).") ||
				strings.Contains(stack, "service.(*Tokens).") || strings.Contains(stack, "service.(*Workspaces).") {
				reached = true
				return
			}
			panic(fmt.Sprintf("%s %s with body %q: %v\n%s", method, path, body, p, stack))
		}
	}()
	return call(h, method, path, token, body), false
}

// discardTriggers is a trigger store that accepts every Put and holds nothing.
type discardTriggers struct{}

var errNoTrigger = errors.New("no such trigger")

func (discardTriggers) Put(context.Context, *schemas.Trigger) (uint64, error) { return 1, nil }
func (discardTriggers) Get(context.Context, string, string) (*schemas.Trigger, error) {
	return nil, errNoTrigger
}
func (discardTriggers) List(context.Context, string) ([]*schemas.Trigger, error) { return nil, nil }
func (discardTriggers) Delete(context.Context, string, string) error             { return errNoTrigger }
func (discardTriggers) Sentinels() (notFound, invalidName error)                 { return errNoTrigger, errNoTrigger }

// discardTemplates stores no pipeline template.
type discardTemplates struct{}

func (discardTemplates) Put(context.Context, *schemas.StoredPipelineTemplate) (uint64, error) {
	return 1, nil
}
func (discardTemplates) Get(context.Context, string, string) (*schemas.StoredPipelineTemplate, error) {
	return nil, errNoTrigger
}

func (discardTemplates) List(context.Context, string) ([]*schemas.StoredPipelineTemplate, error) {
	return nil, nil
}
func (discardTemplates) Delete(context.Context, string, string) error { return errNoTrigger }
func (discardTemplates) Sentinels() (notFound, invalidName error)     { return errNoTrigger, errNoTrigger }
