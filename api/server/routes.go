package server

import (
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
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
	// enabled, when set, says whether this server serves the route.
	enabled func(*Server) bool

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
	// oneOf, when set instead of v, lists the types any one of which the body may be.
	oneOf []any
	media []string
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

func withRules(s *Server) bool { return s.opts.Rules != nil }

// routes is the API.
var routes = []route{
	{method: "GET", path: "/healthz", handler: (*Server).healthz, public: true,
		id: "health", tag: "system", summary: "Liveness; needs no token",
		responses: []reply{{200, "the server answers", jsonBody(map[string]string{})}}},
	{method: "GET", path: "/v1/whoami", handler: (*Server).whoami, verb: auth.VerbRead, ws: wsNone,
		id: "whoami", tag: "access", summary: "The identity of the request's token",
		responses: []reply{{200, "the token's name, workspace, role and expiry", jsonBody(api.Identity{})}}},

	{method: "POST", path: "/v1/tokens", handler: (*Server).createToken, verb: auth.VerbTokens, ws: wsNone, object: "token",
		id: "createToken", tag: "access", summary: "Create a token (admin; a workspace admin in its workspace); the secret is shown only in this answer",
		request:   jsonBody(api.TokenRequest{}),
		responses: []reply{{201, "the token and its secret", jsonBody(api.CreatedToken{})}}},
	{method: "GET", path: "/v1/tokens", handler: (*Server).listTokens, verb: auth.VerbTokens, ws: wsNone, object: "token",
		id: "listTokens", tag: "access", summary: "List tokens (admin; a workspace admin its workspace's), without their secrets",
		query:     []param{{name: "workspace", typ: "string", desc: "only this workspace's tokens"}},
		responses: []reply{{200, "the tokens", jsonBody(api.TokenList{})}}},
	{method: "DELETE", path: "/v1/tokens/{name}", handler: (*Server).revokeToken, verb: auth.VerbTokens, ws: wsNone, object: "token",
		id: "revokeToken", tag: "access", summary: "Revoke a token (admin; a workspace admin its workspace's); it stops working at once",
		responses: []reply{{204, "revoked", nil}}},
	{method: "POST", path: "/v1/workspaces", handler: (*Server).createWorkspace, verb: auth.VerbAdmin, ws: wsNone, object: "workspace",
		id: "createWorkspace", tag: "access", summary: "Register a workspace and its Kubernetes namespace (admin)",
		request:   jsonBody(api.Workspace{}),
		responses: []reply{{201, "the workspace", jsonBody(api.Workspace{})}}},
	{method: "GET", path: "/v1/workspaces", handler: (*Server).listWorkspaces, verb: auth.VerbRead, ws: wsNone, object: "workspace",
		id: "listWorkspaces", tag: "access", summary: "The workspaces the caller may see: all for an admin, its own otherwise",
		responses: []reply{{200, "the workspaces", jsonBody(api.WorkspaceList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}", handler: (*Server).getWorkspace, verb: auth.VerbRead, ws: wsPath, object: "workspace",
		id: "getWorkspace", tag: "access", summary: "A workspace of the registry",
		responses: []reply{{200, "the workspace", jsonBody(api.Workspace{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}", handler: (*Server).deleteWorkspace, verb: auth.VerbAdmin, ws: wsPath, object: "workspace",
		id: "deleteWorkspace", tag: "access", summary: "Delete a workspace that holds no jobs, experiments, pipelines or schedules (admin), and revoke its tokens; 409 while it holds any",
		responses: []reply{{204, "deleted", nil}}},

	{method: "POST", path: "/v1/validate", handler: (*Server).validate, verb: auth.VerbRead, ws: wsNone, readOnly: true,
		id: "validate", tag: "jobs", summary: "Validate a document of any kind (TrainingJob, Experiment, Schedule, Pipeline, Trigger, NotificationRule); creates nothing",
		request:   &payload{oneOf: everyKind(), media: specMedia},
		responses: []reply{{200, "the spec is valid", jsonBody(api.ValidateResult{})}}},
	{method: "POST", path: "/v1/jobs", handler: (*Server).submitJob, verb: auth.VerbWrite, ws: wsBodyLate, object: "job",
		id: "submitJob", tag: "jobs", summary: "Validate and submit a job in the spec's workspace",
		request:   &payload{v: schemas.TrainingJob{}, media: specMedia},
		responses: []reply{{201, "the job, Pending", jsonBody(api.Job{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs", handler: (*Server).listJobs, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "listJobs", tag: "jobs", summary: "List a workspace's jobs, newest first",
		query: listQuery(param{name: "phase", typ: "string", desc: "only jobs in this phase"},
			param{name: "framework", typ: "string", desc: "only jobs of this framework"}, labelParam),
		responses: []reply{{200, "a page of jobs", jsonBody(api.JobList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs/{name}", handler: (*Server).getJob, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "getJob", tag: "jobs", summary: "A job's spec and live status",
		query:     deletedJobParams,
		responses: []reply{{200, "the job", jsonBody(api.Job{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/stop", handler: (*Server).stopJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "stopJob", tag: "jobs", summary: "Stop a job; answers once it is terminal",
		request:   &payload{v: api.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the final phase", jsonBody(api.StopResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/scale", handler: (*Server).scaleJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "scaleJob", tag: "jobs", summary: "Set a running elastic job's replica count within spec.elastic; answers once the gang has it",
		request:   &payload{v: api.ScaleRequest{}, media: jsonMedia},
		responses: []reply{{200, "the replica count", jsonBody(api.ScaleResult{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/jobs/{name}", handler: (*Server).deleteJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "deleteJob", tag: "jobs", summary: "Stop a job if it runs, wait for its cleanup, then delete it (its record, events and logs stay readable by uid unless purge)",
		query:     []param{{name: "purge", typ: "boolean", desc: "remove everything: the workflow history, events, log records and log archive"}},
		responses: []reply{{204, "deleted", nil}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/clone", handler: (*Server).cloneJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "cloneJob", tag: "jobs", summary: "Start a new job from this one's spec with overrides (JSON merge patch)",
		request:   jsonBody(api.CloneRequest{}),
		responses: []reply{{201, "the new job", jsonBody(api.Job{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs/{name}/logs", stream: (*Server).jobLogs, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "jobLogs", tag: "jobs", summary: "A job's log records as JSON lines, from JetStream",
		query: []param{
			{name: "follow", typ: "boolean", desc: "stream until the job is terminal and drained"},
			{name: "replica", typ: "string", desc: "only this replica, such as worker-0"},
			deletedJobParams[0], deletedJobParams[1],
		},
		responses: []reply{{200, "log records, one JSON object per line", &payload{v: events.LogRecord{}, media: ndjson}}}},
	{method: "GET", path: "/v1/workspaces/{ws}/events", stream: (*Server).workspaceEvents, verb: auth.VerbRead, ws: wsPath,
		id: "workspaceEvents", tag: "events", summary: "A workspace's events as JSON lines",
		query: []param{
			{name: "type", typ: "string", desc: "only events of this type"},
			{name: "job", typ: "string", desc: "only this job's events"},
			{name: "since", typ: "string", desc: "how far back, a duration such as 10m; default 1h"},
			{name: "follow", typ: "boolean", desc: "keep streaming new events"},
		},
		responses: []reply{{200, "events, one JSON object per line", &payload{v: events.Event{}, media: ndjson}}}},

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
	{method: "POST", path: "/v1/nodes/{name}/release", handler: (*Server).releaseNode, verb: auth.VerbAdmin, ws: wsNone, object: "node",
		id: "releaseNode", tag: "nodes", summary: "Release a node from quarantine at once (cluster admin); 409 when it is not quarantined",
		request:   jsonBody(api.NodeRelease{}),
		responses: []reply{{200, "the node's verdict after the release", jsonBody(api.Node{})}}},

	{method: "POST", path: "/v1/notificationrules", handler: (*Server).applyRule, verb: auth.VerbWrite, ws: wsBodyLate, enabled: withRules, object: "notification rule",
		id: "applyRule", tag: "notifications", summary: "Create or replace a notification rule in the rule's workspace",
		request:   &payload{v: schemas.NotificationRule{}, media: specMedia},
		responses: []reply{{200, "the rule, secrets redacted", jsonBody(schemas.NotificationRule{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/notificationrules", handler: (*Server).listRules, verb: auth.VerbRead, ws: wsPath, enabled: withRules, object: "notification rule",
		id: "listRules", tag: "notifications", summary: "A workspace's notification rules, secrets redacted",
		responses: []reply{{200, "the rules", jsonBody(api.RuleList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/notificationrules/{name}", handler: (*Server).getRule, verb: auth.VerbRead, ws: wsPath, enabled: withRules, object: "notification rule",
		id: "getRule", tag: "notifications", summary: "A notification rule, secrets redacted",
		responses: []reply{{200, "the rule", jsonBody(schemas.NotificationRule{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/notificationrules/{name}", handler: (*Server).deleteRule, verb: auth.VerbWrite, ws: wsPath, enabled: withRules, object: "notification rule",
		id: "deleteRule", tag: "notifications", summary: "Delete a notification rule",
		responses: []reply{{204, "deleted", nil}}},

	{method: "POST", path: "/v1/pipelines", handler: (*Server).runPipeline, verb: auth.VerbWrite, ws: wsBody, object: "pipeline",
		id: "runPipeline", tag: "pipelines", summary: "Validate a pipeline and start a run of it, named metadata.name, in its workspace",
		query:     []param{{name: "param", typ: "string", repeat: true, desc: "NAME=VALUE: a parameter of the pipeline; repeatable"}},
		request:   &payload{v: schemas.Pipeline{}, media: specMedia},
		responses: []reply{{201, "the run, Pending", jsonBody(api.PipelineRun{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/pipelines", handler: (*Server).listPipelines, verb: auth.VerbRead, ws: wsPath, object: "pipeline",
		id: "listPipelines", tag: "pipelines", summary: "List a workspace's pipeline runs, newest first",
		query:     listQuery(param{name: "phase", typ: "string", desc: "only runs in this phase"}, labelParam),
		responses: []reply{{200, "a page of runs", jsonBody(api.PipelineList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/pipelines/{name}", handler: (*Server).getPipeline, verb: auth.VerbRead, ws: wsPath, object: "pipeline",
		id: "getPipeline", tag: "pipelines", summary: "A pipeline run: the pipeline and the live status of every step",
		responses: []reply{{200, "the run", jsonBody(api.PipelineRun{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/pipelines/{name}/stop", handler: (*Server).stopPipeline, verb: auth.VerbWrite, ws: wsPath, object: "pipeline",
		id: "stopPipeline", tag: "pipelines", summary: "Stop a pipeline run: its jobs are stopped; answers once it is terminal",
		request:   &payload{v: api.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the final phase", jsonBody(api.PipelineStopResult{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/pipelines/{name}", handler: (*Server).deletePipeline, verb: auth.VerbWrite, ws: wsPath, object: "pipeline",
		id: "deletePipeline", tag: "pipelines", summary: "Stop a pipeline run if it runs, then delete it and its step jobs; its name can be used again",
		responses: []reply{{204, "deleted", nil}}},

	{method: "POST", path: "/v1/triggers", handler: (*Server).applyTrigger, verb: auth.VerbWrite, ws: wsBody, object: "trigger",
		id: "applyTrigger", tag: "triggers", summary: "Create or replace a trigger in the trigger's workspace",
		request:   &payload{v: schemas.Trigger{}, media: specMedia},
		responses: []reply{{200, "the trigger", jsonBody(schemas.Trigger{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers", handler: (*Server).listTriggers, verb: auth.VerbRead, ws: wsPath, object: "trigger",
		id: "listTriggers", tag: "triggers", summary: "A workspace's triggers",
		responses: []reply{{200, "the triggers", jsonBody(api.TriggerList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).getTrigger, verb: auth.VerbRead, ws: wsPath, object: "trigger",
		id: "getTrigger", tag: "triggers", summary: "A trigger",
		responses: []reply{{200, "the trigger", jsonBody(schemas.Trigger{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).deleteTrigger, verb: auth.VerbWrite, ws: wsPath, object: "trigger",
		id: "deleteTrigger", tag: "triggers", summary: "Delete a trigger; what it started keeps running",
		responses: []reply{{204, "deleted", nil}}},
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

// tableMux registers every enabled route of the table.
func (s *Server) tableMux() *routeMux {
	mux := newRouteMux()
	for i := range routes {
		rt := &routes[i]
		if rt.enabled != nil && !rt.enabled(s) {
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
