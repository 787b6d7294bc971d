package server

import (
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// route is one operation of the API, as data: the same entry registers the handler on
// the mux and writes the operation into the OpenAPI document (openapi.go), so the two
// cannot drift apart. TestOpenAPIMatchesServedRoutes checks that nothing is served
// that the table does not hold.
type route struct {
	method, path string
	// handler does the call once the router has authenticated and authorized it: it
	// returns the answer's body (written with the first documented status; none for
	// 204) or an error, which errorReply maps to a status and an error body.
	handler func(*Server, *http.Request) (any, error)
	// stream, set instead of handler, writes a streamed answer itself; it returns an
	// error only before it has written anything.
	stream func(*Server, http.ResponseWriter, *http.Request) error
	// feature, when set, is the optional part of the API the route belongs to: a
	// server started without it does not serve the route, or answers 503 (feature).
	feature *feature

	// public routes need no token; every other route authenticates first, then the
	// router authorizes verb (the role policy is auth.Allows) in the workspace ws says.
	public bool
	verb   auth.Verb
	ws     wsScope
	// readOnly marks a POST that changes nothing (validate): not audited.
	readOnly bool
	// object names what {name} is, in not-found answers and audit records.
	object string

	// Documentation.
	id, summary, tag string
	query            []param
	request          *payload
	responses        []reply
}

// wsScope says where a route's workspace comes from.
type wsScope int

const (
	// wsNone: the call concerns no workspace (tokens, workspaces, validate); only the
	// role is checked.
	wsNone wsScope = iota
	// wsPath: the {ws} path segment. Another workspace's objects answer 404, as if
	// nothing were there.
	wsPath
	// wsBody: the document's metadata.workspace. The router checks the role first; the
	// handler names the workspace once the document is read (Server.inWorkspace),
	// and another workspace is refused with 403 before anything is created.
	wsBody
	// wsBodyLate: the document's metadata.workspace, with the role checked only once
	// the document is read (Server.inWorkspace checks the workspace, then the role): an
	// invalid document is answered 422 whoever sends it, and a document naming another
	// workspace 403 naming metadata.workspace. Job submission and notification rules
	// have always answered so.
	wsBodyLate
)

// success is the status of a successful answer: the first documented one.
func (rt *route) success() int {
	if len(rt.responses) > 0 {
		return rt.responses[0].status
	}
	return http.StatusOK
}

// pattern is the route's ServeMux pattern.
func (rt *route) pattern() string { return rt.method + " " + rt.path }

// mutating reports whether calls of the route are audited.
func (rt *route) mutating() bool {
	switch rt.method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !rt.readOnly
}

// param is a query parameter.
type param struct {
	name, typ, desc string
	repeat          bool
}

// payload is a request or response body: a Go value whose type gives the schema, and
// its media types.
type payload struct {
	v any
	// anyOf, when set instead of v, lists the types any one of which the body may be.
	anyOf []any
	// redacted answers hold secrets redacted (rules.go): their schema allows that.
	redacted bool
	media    []string
	// optional bodies may be left out.
	optional bool
}

// reply is one documented success answer.
type reply struct {
	status int
	desc   string
	body   *payload
}

var (
	specMedia = []string{"application/yaml", "application/json"}
	jsonMedia = []string{"application/json"}
	ndjson    = []string{"application/x-ndjson"}
)

func jsonBody(v any) *payload { return &payload{v: v, media: jsonMedia} }

// redactedBody is an answer whose secrets are redacted.
func redactedBody(v any) *payload { return &payload{v: v, media: jsonMedia, redacted: true} }

// labelParam filters a list by labels.
var labelParam = param{name: "label", typ: "string", repeat: true, desc: "key=value; repeatable, all must match"}

// listQuery is a paged list's query: its filters, then limit and pageToken.
func listQuery(filters ...param) []param {
	return append(filters,
		param{name: "limit", typ: "integer", desc: "page size, 1 to 1000; default 100"},
		param{name: "pageToken", typ: "string", desc: "the previous page's nextPageToken"})
}

// everyKind is an empty document of every kind, for a body that may be any of them.
func everyKind() []any {
	var out []any
	for _, k := range schemas.Kinds() {
		out = append(out, schemas.NewObject(k))
	}
	return out
}

// routes is the API: the route table. It is assembled once, from the routes of no
// kind (below) and each kind's, which its registration names (kinds.go).
var routes = tableRoutes()

// systemRoutes are health, identity, tokens, workspaces and validation.
var systemRoutes = []route{
	{method: "GET", path: "/healthz", handler: (*Server).healthz, public: true,
		id: "health", tag: "system", summary: "Liveness; needs no token",
		responses: []reply{{200, "the server answers", jsonBody(map[string]string{})}}},
	{method: "GET", path: "/v1/openapi.json", stream: (*Server).openAPI, public: true,
		id: "openAPI", tag: "system", summary: "This API's OpenAPI 3.1 document (docs/openapi.json); needs no token",
		responses: []reply{{200, "the OpenAPI document", jsonBody(map[string]any{})}}},
	{method: "GET", path: "/v1/whoami", handler: (*Server).whoami, verb: auth.VerbRead, ws: wsNone,
		id: "whoami", tag: "access", summary: "The identity of the request's token",
		responses: []reply{{200, "the token's name, workspace, role and expiry", jsonBody(api.Identity{})}}},

	{method: "POST", path: "/v1/tokens", handler: (*Server).createToken, verb: auth.VerbTokens, ws: wsNone, feature: tokensFeature, object: "token",
		id: "createToken", tag: "access", summary: "Create a token (admin; a workspace admin in its workspace); the secret is shown only in this answer",
		request:   jsonBody(api.TokenRequest{}),
		responses: []reply{{201, "the token and its secret", jsonBody(api.CreatedToken{})}}},
	{method: "GET", path: "/v1/tokens", handler: (*Server).listTokens, verb: auth.VerbTokens, ws: wsNone, feature: tokensFeature, object: "token",
		id: "listTokens", tag: "access", summary: "List tokens (admin; a workspace admin its workspace's), without their secrets",
		query:     []param{{name: "workspace", typ: "string", desc: "only this workspace's tokens"}},
		responses: []reply{{200, "the tokens", jsonBody(api.TokenList{})}}},
	{method: "DELETE", path: "/v1/tokens/{name}", handler: (*Server).revokeToken, verb: auth.VerbTokens, ws: wsNone, feature: tokensFeature, object: "token",
		id: "revokeToken", tag: "access", summary: "Revoke a token (admin; a workspace admin its workspace's); it stops working at once",
		responses: []reply{{204, "revoked", nil}}},
	{method: "POST", path: "/v1/workspaces", handler: (*Server).createWorkspace, verb: auth.VerbAdmin, ws: wsNone, feature: workspacesFeature, object: "workspace",
		id: "createWorkspace", tag: "access", summary: "Register a workspace and its Kubernetes namespace (admin)",
		request:   jsonBody(api.WorkspaceRequest{}),
		responses: []reply{{201, "the workspace", jsonBody(api.Workspace{})}}},
	{method: "GET", path: "/v1/workspaces", handler: (*Server).listWorkspaces, verb: auth.VerbRead, ws: wsNone, feature: workspacesFeature, object: "workspace",
		id: "listWorkspaces", tag: "access", summary: "The workspaces the caller may see: all for an admin, its own otherwise",
		responses: []reply{{200, "the workspaces", jsonBody(api.WorkspaceList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}", handler: (*Server).getWorkspace, verb: auth.VerbRead, ws: wsPath, feature: workspacesFeature, object: "workspace",
		id: "getWorkspace", tag: "access", summary: "A workspace of the registry",
		responses: []reply{{200, "the workspace", jsonBody(api.Workspace{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}", handler: (*Server).deleteWorkspace, verb: auth.VerbAdmin, ws: wsPath, feature: workspacesFeature, object: "workspace",
		id: "deleteWorkspace", tag: "access", summary: "Delete a workspace that holds no jobs, experiments, pipelines or schedules (admin), and revoke its tokens; 409 while it holds any",
		responses: []reply{{204, "deleted", nil}}},

	{method: "POST", path: "/v1/validate", handler: (*Server).validate, verb: auth.VerbRead, ws: wsNone, readOnly: true,
		id: "validate", tag: "jobs", summary: "Validate a document of any kind (TrainingJob, Experiment, Schedule, Pipeline, Trigger, NotificationRule); creates nothing",
		request:   &payload{anyOf: everyKind(), media: specMedia},
		responses: []reply{{200, "the spec is valid", jsonBody(api.ValidateResult{})}}},
}

// clusterRoutes are a workspace's events and quota, and the nodes.
var clusterRoutes = []route{
	{method: "GET", path: "/v1/workspaces/{ws}/events", stream: (*Server).workspaceEvents, verb: auth.VerbRead, ws: wsPath,
		id: "workspaceEvents", tag: "events", summary: "A workspace's events as JSON lines",
		query: []param{
			{name: "type", typ: "string", desc: "only events of this type"},
			{name: "job", typ: "string", desc: "only this job's events"},
			{name: "since", typ: "string", desc: "how far back, a duration such as 10m; default 1h"},
			{name: "follow", typ: "boolean", desc: "keep streaming new events"},
		},
		responses: []reply{{200, "events, one JSON object per line", &payload{v: events.Event{}, media: ndjson}}}},

	{method: "GET", path: "/v1/workspaces/{ws}/audit", handler: (*Server).workspaceAudit, verb: auth.VerbTokens, ws: wsPath, feature: auditFeature,
		id: "workspaceAudit", tag: "access", summary: "A workspace's latest audit records, newest first (those who may manage its tokens: a workspace admin of it, or an admin)",
		query: []param{
			{name: "since", typ: "string", desc: "how far back, a duration such as 24h; default and at most 168h"},
			{name: "limit", typ: "integer", desc: "at most this many records, 1 to 50; default 50"},
		},
		responses: []reply{{200, "the audit records, newest first", jsonBody(api.AuditList{})}}},

	{method: "PUT", path: "/v1/workspaces/{ws}/quota", handler: (*Server).setQuota, verb: auth.VerbAdmin, ws: wsPath,
		id: "setQuota", tag: "quota", summary: "Set a workspace's quota (admin)",
		request:   jsonBody(api.Quota{}),
		responses: []reply{{200, "the quota set", jsonBody(api.Quota{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/quota", handler: (*Server).getQuota, verb: auth.VerbRead, ws: wsPath,
		id: "getQuota", tag: "quota", summary: "A workspace's quota, use, admitted and queued jobs",
		responses: []reply{{200, "the quota and its use", jsonBody(api.QuotaStatus{})}}},

	{method: "GET", path: "/v1/nodes", handler: (*Server).listNodes, verb: auth.VerbRead, ws: wsNone, object: "node",
		id: "listNodes", tag: "nodes", summary: "Every node's latest health verdict and quarantine state (a token of every workspace)",
		responses: []reply{{200, "the nodes, by name", jsonBody(api.NodeList{})}}},
	{method: "GET", path: "/v1/nodes/{name}", handler: (*Server).getNode, verb: auth.VerbRead, ws: wsNone, object: "node",
		id: "getNode", tag: "nodes", summary: "A node's latest health verdict and quarantine state (a token of every workspace)",
		responses: []reply{{200, "the node", jsonBody(api.Node{})}}},
	{method: "GET", path: "/v1/node-healer", handler: (*Server).getNodeHealer, verb: auth.VerbAdmin, ws: wsNone,
		id: "getNodeHealer", tag: "nodes", summary: "The node self-healing workflow's state: its counters and its latest round's re-checks; running false when it is not running (cluster admin)",
		responses: []reply{{200, "the workflow's state", jsonBody(api.NodeHealer{})}}},
	{method: "POST", path: "/v1/nodes/{name}/release", handler: (*Server).releaseNode, verb: auth.VerbAdmin, ws: wsNone, object: "node",
		id: "releaseNode", tag: "nodes", summary: "Release a node from quarantine at once (cluster admin); 409 when it is not quarantined",
		request:   jsonBody(api.NodeRelease{}),
		responses: []reply{{200, "the node's verdict after the release", jsonBody(api.Node{})}}},
}

// routeMux is a ServeMux that remembers what it serves, so that a test can compare
// the served routes with the OpenAPI document.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers a handler.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers a handler function.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// feature is an optional part of the API: its routes work only on a server started
// with what they need (a store given by an Option).
type feature struct {
	// on says whether the server has what the feature needs.
	on func(*Server) bool
	// off, when set, is the 503 answer of the feature's routes on a server without it,
	// given once the call is authorized; when empty, such a server does not serve them
	// (404).
	off string
}

// Optional features.
var (
	// rulesFeature is served when the service serves rules (service.Config.Rules).
	rulesFeature = &feature{on: func(s *Server) bool { return s.svc.Rules != nil }}
	// triggersFeature answers 503 when the service serves no triggers
	// (service.Config.Triggers).
	triggersFeature = &feature{on: func(s *Server) bool { return s.svc.Triggers != nil },
		off: "this server does not serve triggers: it was started without a trigger store"}
	// tokensFeature and workspacesFeature answer 503 without a token store
	// (service.Config.Auth); the server then authenticates nobody anyway.
	tokensFeature     = &feature{on: func(s *Server) bool { return s.svc.Tokens != nil }, off: "no token store configured"}
	workspacesFeature = &feature{on: func(s *Server) bool { return s.svc.Workspaces != nil }, off: "no token store configured"}
	// auditFeature answers 503 when the service reads no audit records (it was
	// composed without JetStream: service.Config.Events).
	auditFeature = &feature{on: func(s *Server) bool { return s.svc.Audit != nil },
		off: "this server does not serve audit records: it was started without JetStream"}
)

// served reports whether s serves the route: a route of a feature s lacks is not
// served unless the feature answers 503.
func (rt *route) served(s *Server) bool {
	return rt.feature == nil || rt.feature.on(s) || rt.feature.off != ""
}

// tableMux registers every route of the table that s serves.
func (s *Server) tableMux() *routeMux {
	mux := newRouteMux()
	for i := range routes {
		rt := &routes[i]
		if !rt.served(s) {
			continue
		}
		mux.HandleFunc(rt.pattern(), func(w http.ResponseWriter, r *http.Request) { s.serveRoute(rt, w, r) })
	}
	return mux
}

// serveRoute authorizes a call as its route declares, runs the handler and answers
// its result or its error. (Authentication and audit are withAuth's.)
func (s *Server) serveRoute(rt *route, w http.ResponseWriter, r *http.Request) {
	if st := requestOf(r); st != nil {
		st.w = w
	}
	if err := checkParams(rt, r); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !rt.public {
		ws := ""
		if rt.ws == wsPath {
			ws = r.PathValue("ws")
		}
		if rt.ws != wsBodyLate {
			if err := s.authorize(r, ws, rt.verb); err != nil {
				s.writeErr(w, r, err)
				return
			}
		}
	}
	if rt.feature != nil && !rt.feature.on(s) {
		s.writeErr(w, r, unavailable(rt.feature.off))
		return
	}
	// The workflows the call starts are listed under the token's name (DlcOwner).
	if id, ok := IdentityFrom(r.Context()); ok {
		r = r.WithContext(service.WithOwner(r.Context(), id.Name))
	}
	if rt.stream != nil {
		if err := rt.stream(s, w, r); err != nil {
			s.writeErr(w, r, err)
		}
		return
	}
	resp, err := rt.handler(s, r)
	switch {
	case err != nil:
		s.writeErr(w, r, err)
	case rt.success() == http.StatusNoContent:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, rt.success(), resp)
	}
}

// routeByPattern finds the table entry of a mux pattern; nil for a route registered
// outside the table.
func routeByPattern(pattern string) *route {
	for i := range routes {
		if routes[i].pattern() == pattern {
			return &routes[i]
		}
	}
	return nil
}

// pathWorkspace is the {ws} segment of a /v1/workspaces/{ws}/... path, for requests
// refused before routing.
func pathWorkspace(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/workspaces/")
	if !ok {
		return ""
	}
	ws, _, _ := strings.Cut(rest, "/")
	return ws
}

func (s *Server) healthz(*http.Request) (any, error) {
	return map[string]string{"status": "ok"}, nil
}
