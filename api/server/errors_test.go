package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/serviceerror"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// errorReply is the one mapping from errors to answers: every kind of error a handler
// or the router returns has its status and body.
func TestErrorReply(t *testing.T) {
	field := []schemas.FieldError{{Field: "limit", Detail: "must be an integer between 1 and 1000"}}
	cases := []struct {
		name   string
		err    error
		status int
		body   api.Error
	}{
		{"not found", &service.Error{Kind: service.ErrNotFound, Message: "job j not found in workspace w"},
			404, api.Error{Code: api.CodeNotFound, Message: "job j not found in workspace w"}},
		{"wrapped not found", fmt.Errorf("x: %w", &service.Error{Kind: service.ErrNotFound, Message: "m"}),
			404, api.Error{Code: api.CodeNotFound, Message: "m"}},
		{"already exists", &service.Error{Kind: service.ErrAlreadyExists, Message: "job j already exists"},
			409, api.Error{Code: api.CodeAlreadyExists, Message: "job j already exists"}},
		{"invalid", &service.Error{Kind: service.ErrInvalid, Message: "invalid limit", Fields: field},
			400, api.Error{Code: api.CodeInvalidArgument, Message: "invalid limit", Details: field}},
		{"invalid object", &service.Error{Kind: service.ErrInvalidObject, Message: "create token: 1 problem(s)",
			Fields: []schemas.FieldError{{Field: "ttl", Detail: "too long"}}},
			422, api.Error{Code: api.CodeInvalidArgument, Message: "create token: 1 problem(s)",
				Details: []schemas.FieldError{{Field: "ttl", Detail: "too long"}}}},
		{"conflict", &service.Error{Kind: service.ErrConflict, Message: "cannot resume experiment e: it has ended (Succeeded)"},
			409, api.Error{Code: api.CodeFailedPrecondition, Message: "cannot resume experiment e: it has ended (Succeeded)"}},
		{"spec", schemas.ErrorList{schemas.Required(schemas.NewPath("spec", "roles"))},
			422, api.Error{Code: api.CodeInvalidSpec, Message: "the spec has 1 problem(s)",
				Details: []schemas.FieldError{*schemas.Required(schemas.NewPath("spec", "roles"))}}},
		{"document", specError(errors.New("not YAML")),
			400, api.Error{Code: api.CodeInvalidSpec, Message: "not YAML", Details: []schemas.FieldError{{Field: "body", Detail: "not YAML"}}}},
		{"too large", bodyReadError(&http.MaxBytesError{Limit: 10}, 10),
			413, api.Error{Code: api.CodeTooLarge, Message: "request body is larger than 10 bytes",
				Details: []schemas.FieldError{{Field: "body", Detail: "must be at most 10 bytes"}}}},
		{"bad request", badRequest("invalid since", "since", "must be a duration such as 10m or 24h"),
			400, api.Error{Code: api.CodeInvalidArgument, Message: "invalid since",
				Details: []schemas.FieldError{{Field: "since", Detail: "must be a duration such as 10m or 24h"}}}},
		{"temporal unavailable", fmt.Errorf("start job: %w", serviceerror.NewUnavailable("down")),
			503, api.Error{Code: api.CodeUnavailable, Message: "start job: down"}},
		{"deadline", fmt.Errorf("query job: %w", context.DeadlineExceeded),
			503, api.Error{Code: api.CodeUnavailable, Message: "query job: context deadline exceeded"}},
		{"temporal deadline", fmt.Errorf("query job: %w", serviceerror.NewDeadlineExceeded("timed out")),
			503, api.Error{Code: api.CodeUnavailable, Message: "query job: timed out"}},
		{"temporal cancelled the query", fmt.Errorf("query job: %w", serviceerror.NewCanceled("context canceled")),
			503, api.Error{Code: api.CodeUnavailable, Message: "query job: context canceled"}},
		{"internal", fmt.Errorf("store rule: %w", errors.New("boom")),
			500, api.Error{Code: api.CodeInternal, Message: "store rule: boom"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := errorReply(c.err)
			if status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
			if d := cmp.Diff(c.body, body); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}

// Every route of the table declares what it needs: a verb of the policy and where its
// workspace comes from, consistent with its path; and the router enforces the verb.
func TestRouteTableDeclaresAuthorization(t *testing.T) {
	s := testServer(nil, fakeAuth{})
	for i := range routes {
		rt := &routes[i]
		if rt.public {
			continue
		}
		t.Run(rt.pattern(), func(t *testing.T) {
			if rt.verb == "" {
				t.Fatal("no verb: every request would be refused")
			}
			hasWS := rt.path == "/v1/workspaces/{ws}" || len(rt.path) > len("/v1/workspaces/{ws}/") &&
				rt.path[:len("/v1/workspaces/{ws}/")] == "/v1/workspaces/{ws}/"
			if hasWS != (rt.ws == wsPath) {
				t.Errorf("ws scope %d does not match the path", rt.ws)
			}
			if (rt.ws == wsBody || rt.ws == wsBodyLate) && (rt.method != http.MethodPost || rt.request == nil) {
				t.Errorf("a workspace from the body needs a POSTed document")
			}
			if rt.mutating() && rt.verb == "read" {
				t.Errorf("a mutating route needs more than read")
			}
			// The roles below the verb are refused, the role of the verb is not.
			for role, verbs := range map[api.Role][]string{
				api.RoleViewer: {"read"}, api.RoleMember: {"read", "write"},
				api.RoleWorkspaceAdmin: {"read", "write", "tokens"}, api.RoleAdmin: {"read", "write", "tokens", "admin"},
			} {
				allowed := false
				for _, v := range verbs {
					allowed = allowed || string(rt.verb) == v
				}
				r := requestAs(rt, api.Identity{Name: "t", Workspace: "alpha", Role: role})
				ws := ""
				if rt.ws == wsPath {
					ws = "alpha"
				}
				err := s.authorize(r, ws, rt.verb)
				if allowed != (err == nil) {
					t.Errorf("%s: authorize = %v, want allowed %t", role, err, allowed)
				}
				if err != nil {
					if status, body := errorReply(err); status != http.StatusForbidden || body.Code != api.CodePermissionDenied {
						t.Errorf("%s: refused with %d %s, want 403", role, status, body.Code)
					}
				}
			}
		})
	}
}

// requestAs is a request of rt's route in workspace alpha, authenticated as id.
func requestAs(rt *route, id api.Identity) *http.Request {
	r, _ := http.NewRequest(rt.method, concretePath(rt, "alpha"), nil)
	r.SetPathValue("ws", "alpha")
	r.SetPathValue("name", "x")
	st := &request{route: rt, authenticated: true, identity: id}
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
}
