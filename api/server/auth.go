package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// authenticator resolves a bearer token to an identity; *auth.Store is the real one.
type authenticator interface {
	Authenticate(ctx context.Context, token string) (api.Identity, error)
}

var _ authenticator = (*auth.Store)(nil)

// Server timeouts. Responses have no write timeout: logs and events stream for as long
// as the caller follows them.
const (
	// readHeaderTimeout bounds reading a request's headers.
	readHeaderTimeout = 10 * time.Second
	// readBodyTimeout bounds reading a request's body, from the end of its headers.
	readBodyTimeout = 30 * time.Second
	// idleTimeout closes keep-alive connections without requests.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// request is what the middleware knows about a request, in its context.
type request struct {
	id    string // X-Request-Id
	route *route // nil for a route registered outside the table
	// pattern is the mux pattern matched.
	pattern string
	// authenticated is set once the token was accepted; identity is then the caller.
	authenticated bool
	identity      api.Identity
	// workspace and object are what the call acts on, for the audit record; authorize
	// and note set them.
	workspace, object string
	// w is the answer's writer, for reading a body with a size limit.
	w http.ResponseWriter
}

type ctxKey struct{}

func requestOf(r *http.Request) *request {
	st, _ := r.Context().Value(ctxKey{}).(*request)
	return st
}

// IdentityFrom returns the caller's identity, once the request was authenticated.
func IdentityFrom(ctx context.Context) (api.Identity, bool) {
	st, _ := ctx.Value(ctxKey{}).(*request)
	if st == nil || !st.authenticated {
		return api.Identity{}, false
	}
	return st.identity, true
}

// withAuth wraps the routes: it names the request, answers unknown routes in the API's
// error shape, bounds the time to read a body, authenticates every route that is not
// public (routes registered outside the table included), and audits mutating calls.
func (s *Server) withAuth(mux *routeMux) http.Handler {
	s.served = mux
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &request{id: newRequestID()}
		w.Header().Set("X-Request-Id", st.id)
		_, st.pattern = mux.Handler(r)
		if st.pattern == "" {
			unmatched(w, r, mux)
			return
		}
		st.route = routeByPattern(st.pattern)
		rec := &recorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
		limitBodyTime(rec, r)
		if st.route == nil || !st.route.public {
			if !s.authenticate(rec, r, st) {
				s.audit(r, st, rec, start)
				return
			}
		}
		mux.ServeHTTP(rec, r)
		s.audit(r, st, rec, start)
	})
}

// authenticate checks the request's bearer token; on failure it has answered 401 (or
// 503 when the token store cannot be reached).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, st *request) bool {
	if s.authn == nil {
		writeError(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable,
			Message: "authentication is not configured on this server"})
		return false
	}
	header := r.Header.Get("Authorization")
	if header == "" {
		unauthenticated(w, "a bearer token is required: Authorization: Bearer <token>")
		return false
	}
	token, err := auth.ParseBearer(header)
	if err != nil {
		unauthenticated(w, "malformed token: want Authorization: Bearer dlc_...")
		return false
	}
	id, err := s.authn.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, auth.ErrExpiredToken):
		unauthenticated(w, "the token has expired")
		return false
	case errors.Is(err, auth.ErrUnknownToken), errors.Is(err, auth.ErrMalformedToken):
		unauthenticated(w, "invalid token")
		return false
	case err != nil:
		s.opts.Logger.Error("authenticate", "error", err)
		writeError(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: "cannot check the token now; try again"})
		return false
	}
	st.authenticated, st.identity = true, id
	return true
}

func unauthenticated(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="opendlc"`)
	writeError(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: msg})
}

// authorize is the router's check before any handler of a route that is not public
// runs (serveRoute), and inWorkspace's once a document names its workspace: may the
// caller do verb in workspace ws ("" when the call concerns no workspace)? A refusal
// is an error to answer:
//   - 404 for another workspace's object named in the path, exactly as if nothing
//     existed there, so nobody learns what another workspace holds;
//   - 403 for a document (a spec, a rule) that names another workspace;
//   - 403 when the token's role may not do verb.
func (s *Server) authorize(r *http.Request, ws string, verb auth.Verb) error {
	st := requestOf(r)
	if st == nil || !st.authenticated {
		return &httpError{http.StatusUnauthorized, api.Error{Code: api.CodeUnauthenticated, Message: "a bearer token is required"}}
	}
	if ws != "" {
		st.workspace = ws
		if !auth.InWorkspace(st.identity, ws) {
			if ws == r.PathValue("ws") {
				return hidden(r, st, ws)
			}
			return &httpError{http.StatusForbidden, api.Error{Code: api.CodePermissionDenied,
				Message: fmt.Sprintf("token %s belongs to workspace %s and cannot act in workspace %s", st.identity.Name, st.identity.Workspace, ws),
				Details: []schemas.FieldError{{Field: "metadata.workspace", Detail: "must be the token's workspace, " + st.identity.Workspace}}}}
		}
	}
	if !auth.Allows(st.identity.Role, verb) {
		return &httpError{http.StatusForbidden, api.Error{Code: api.CodePermissionDenied,
			Message: fmt.Sprintf("role %s may not %s here", st.identity.Role, verbWords[verb])}}
	}
	return nil
}

// inWorkspace is the authorization of a wsBody or wsBodyLate route once its document
// is read: the document names workspace ws and the object (for the audit record); the
// caller must be allowed the route's verb there.
func (s *Server) inWorkspace(r *http.Request, ws, object string) error {
	note(r, ws, object)
	verb := auth.VerbWrite
	if st := requestOf(r); st != nil && st.route != nil {
		verb = st.route.verb
	}
	return s.authorize(r, ws, verb)
}

var verbWords = map[auth.Verb]string{
	auth.VerbRead:   "read",
	auth.VerbWrite:  "submit, change or delete",
	auth.VerbTokens: "manage tokens",
	auth.VerbAdmin:  "manage workspaces or quotas",
}

// hidden answers a request for another workspace's object with the same 404 as for an
// object that does not exist.
func hidden(r *http.Request, st *request, ws string) error {
	msg := fmt.Sprintf("workspace %s not found", ws)
	if name := r.PathValue("name"); name != "" {
		object := "object"
		if st.route != nil && st.route.object != "" {
			object = st.route.object
		}
		msg = fmt.Sprintf("%s %s not found in workspace %s", object, name, ws)
	}
	return notFound(msg)
}

// note records what a call acts on when it is not in the path (a submitted spec's
// workspace and name), for the audit record.
func note(r *http.Request, ws, object string) {
	if st := requestOf(r); st != nil {
		if ws != "" {
			st.workspace = ws
		}
		st.object = object
	}
}

// unmatched answers a request no route matches in the API's error shape: 404, or 405
// when the path exists with other methods.
func unmatched(w http.ResponseWriter, r *http.Request, mux *routeMux) {
	probe := &recorder{ResponseWriter: discard{header: http.Header{}}}
	mux.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.Header().Get("Allow"))
		writeError(w, http.StatusMethodNotAllowed, api.Error{Code: api.CodeMethodNotAllowed,
			Message: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)})
		return
	}
	writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no such route: " + r.URL.Path})
}

// discard is a ResponseWriter that keeps only headers.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// limitBodyTime bounds the time to read a request body. The deadline is lifted when
// the body has been read, because the connection's read deadline also cancels the
// request's context: a long stop or a followed log must not be cut short.
func limitBodyTime(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(readBodyTimeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// recorder remembers the status and API error code of an answer, for the audit record.
type recorder struct {
	http.ResponseWriter
	status int
	code   string
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (logs, events) flush through the recorder.
func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
