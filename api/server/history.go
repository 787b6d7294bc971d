package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
)

// Run records (package runs): a workspace's history of finished runs, one record,
// lineage from a checkpoint or a schedule, and resource usage. They are read from the
// server's runs.Store (Options.Runs); a server without one answers 503. Every query
// is scoped to the workspaces the caller may read: the path's {ws} (the router has
// checked it), or for usage the workspaces the token reaches.

// WithRuns serves run records from store (history, lineage, usage); nil: those routes
// answer 503.
func WithRuns(store runs.Store) Option { return func(o *Options) { o.Runs = store } }

// runsFeature answers 503 when the server has no run record store.
var runsFeature = &feature{on: func(s *Server) bool { return s.opts.Runs != nil },
	off: "run records are not configured: this server was started without a run record store"}

// Bounds of the run record routes.
const (
	// maxLineage bounds the records of one lineage answer.
	maxLineage = 1000
	// defaultUsageRange is the usage range when from is not given; maxUsageRange the
	// longest one asked.
	defaultUsageRange = 30 * 24 * time.Hour
	maxUsageRange     = 366 * 24 * time.Hour
	// maxURILength bounds a checkpoint or data URI in a query.
	maxURILength = 2048
	// maxCursorLength bounds a history page's cursor.
	maxCursorLength = 1024
)

var (
	uriParamRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://[^\s\x00-\x1f\x7f]+$`)
	// cursorParamRE is a store's page cursor: opaque, but of base64 (either alphabet)
	// and separator characters only.
	cursorParamRE = regexp.MustCompile(`^[A-Za-z0-9_=+/.:-]+$`)
)

// historyRoutes are the run record routes.
var historyRoutes = []route{
	{method: "GET", path: "/v1/workspaces/{ws}/history", handler: (*Server).listHistory, verb: auth.VerbRead, ws: wsPath, feature: runsFeature,
		id: "listHistory", tag: "history", summary: "A workspace's run records (finished jobs, experiments and pipeline runs), newest first; kept after Temporal forgets the runs",
		query: []param{
			{name: "kind", typ: "string", desc: "only runs of this kind: TrainingJob, Experiment or Pipeline"},
			{name: "name", typ: "string", desc: "only runs of this name"},
			labelParam,
			{name: "phase", typ: "string", desc: "only runs that ended in this phase, such as Failed"},
			{name: "finishedAfter", typ: "string", desc: "only runs that finished at or after this time (RFC 3339, or a YYYY-MM-DD date in UTC)"},
			{name: "finishedBefore", typ: "string", desc: "only runs that finished before this time (RFC 3339, or a YYYY-MM-DD date in UTC)"},
			{name: "origin", typ: "string", desc: "only runs started by this: Kind or Kind/name, Kind one of User, Schedule, Trigger, Pipeline, Experiment"},
			{name: "parent", typ: "string", desc: "only the runs of this experiment or pipeline run (its uid)"},
			{name: "checkpoint", typ: "string", desc: "only runs whose checkpoint, or one of whose inputs, starts with this URI"},
			{name: "limit", typ: "integer", desc: "page size, 1 to 1000; default 100"},
			{name: "after", typ: "string", desc: "the previous page's next"},
		},
		responses: []reply{{200, "one page of run records", jsonBody(runs.Page{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/history/{kind}/{uid}", handler: (*Server).getHistory, verb: auth.VerbRead, ws: wsPath, feature: runsFeature, object: "run record",
		id: "getHistory", tag: "history", summary: "One run record: spec, attempts, metrics, checkpoint, inputs, origin; 404 when the workspace has none of that kind and uid",
		responses: []reply{{200, "the run record", jsonBody(runs.Record{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/lineage", handler: (*Server).lineage, verb: auth.VerbRead, ws: wsPath, feature: runsFeature,
		id: "lineage", tag: "history", summary: "Lineage from a checkpoint (the runs that wrote or read under the URI, with their inputs) or from a schedule (every run it started and their runs); exactly one of checkpoint and schedule",
		query: []param{
			{name: "checkpoint", typ: "string", desc: "a checkpoint or model URI (or a prefix of one)"},
			{name: "schedule", typ: "string", desc: "a schedule's name"},
		},
		responses: []reply{{200, "the run records, newest first", jsonBody(api.Lineage{})}}},
	{method: "GET", path: "/v1/usage", handler: (*Server).usage, verb: auth.VerbRead, ws: wsNone, feature: runsFeature,
		id: "usage", tag: "history", summary: "GPU-, CPU- and memory-hours per workspace and UTC day (and label value) from the attempts' running times; a workspace's token reads its own workspace only",
		query: []param{
			{name: "workspace", typ: "string", repeat: true, desc: "only these workspaces (repeatable); default the token's workspace, every workspace for a token of every workspace"},
			{name: "from", typ: "string", desc: "start of the range (RFC 3339, or a YYYY-MM-DD date in UTC); default 30 days before to"},
			{name: "to", typ: "string", desc: "end of the range, excluded (RFC 3339, or a YYYY-MM-DD date in UTC); default now; at most 366 days after from"},
			{name: "groupByLabel", typ: "string", desc: "group by this label's value as well"},
		},
		responses: []reply{{200, "the usage rows, by workspace, day and label value", jsonBody(api.Usage{})}}},
}

// historyChecks are the checks of the run record routes' query parameters (merged
// into queryChecks).
var historyChecks = map[string]paramCheck{
	"kind": func(v string) string {
		if !runs.Kind(v).Valid() {
			return fmt.Sprintf("must be %s, %s or %s", runs.KindJob, runs.KindExperiment, runs.KindPipeline)
		}
		return ""
	},
	"name":           schemas.CheckObjectName,
	"schedule":       schemas.CheckObjectName,
	"finishedAfter":  checkTime,
	"finishedBefore": checkTime,
	"from":           checkTime,
	"to":             checkTime,
	"origin": func(v string) string {
		kind, name, hasName := strings.Cut(v, "/")
		if !slices.Contains(originKinds, kind) || hasName && schemas.CheckObjectName(name) != "" {
			return "must be Kind or Kind/name, Kind one of " + strings.Join(originKinds, ", ") + " and name a DNS label"
		}
		return ""
	},
	"parent": checkRunUID,
	"checkpoint": func(v string) string {
		if len(v) > maxURILength || !uriParamRE.MatchString(v) {
			return fmt.Sprintf("must be a URI such as s3://bucket/prefix, at most %d bytes", maxURILength)
		}
		return ""
	},
	"after": func(v string) string {
		if len(v) > maxCursorLength || !cursorParamRE.MatchString(v) {
			return fmt.Sprintf("must be the previous page's next (at most %d bytes)", maxCursorLength)
		}
		return ""
	},
	"groupByLabel": func(v string) string {
		if strings.Contains(v, "=") || schemas.CheckLabelFilter(v+"=") != "" {
			return "must be a label key such as team"
		}
		return ""
	},
}

// historyPathChecks are the checks of the run record routes' path parameters (merged
// into pathChecks).
var historyPathChecks = map[string]paramCheck{
	"kind": historyChecks["kind"],
	"uid":  checkRunUID,
}

func init() {
	for name, check := range historyChecks {
		if queryChecks[name] != nil {
			panic("api/server: query parameter " + name + " has two checks")
		}
		queryChecks[name] = check
	}
	for name, check := range historyPathChecks {
		if pathChecks[name] != nil {
			panic("api/server: path parameter {" + name + "} has two checks")
		}
		pathChecks[name] = check
	}
	paramDocs["kind"] = "the run's kind: TrainingJob, Experiment or Pipeline"
	paramDocs["uid"] = "the run's uid"
}

// originKinds are what may start a run (runs.Origin.Kind).
var originKinds = []string{runs.OriginUser, runs.OriginSchedule, runs.OriginTrigger, runs.OriginPipeline, runs.OriginExperiment}

func checkRunUID(v string) string {
	if !uidRE.MatchString(v) {
		return "must be a run's uid, as history shows it"
	}
	return ""
}

func checkTime(v string) string {
	if _, err := parseTime(v); err != nil {
		return "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, or a YYYY-MM-DD date (UTC)"
	}
	return ""
}

// parseTime reads an RFC 3339 time or a date (midnight UTC).
func parseTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

// timeParam reads an optional time parameter (checked by checkParams): zero when not
// set.
func timeParam(q url.Values, name string) time.Time {
	t, _ := parseTime(q.Get(name))
	return t
}

// historyQuery reads a history query's parameters, each already checked as a value;
// here the ones that do not go together are refused.
func historyQuery(q url.Values) (runs.Query, error) {
	out := runs.Query{
		Kind: runs.Kind(q.Get("kind")), Name: q.Get("name"), Phase: q.Get("phase"),
		FinishedAfter: timeParam(q, "finishedAfter"), FinishedBefore: timeParam(q, "finishedBefore"),
		Parent: q.Get("parent"), Checkpoint: q.Get("checkpoint"), After: q.Get("after"),
	}
	if !out.FinishedAfter.IsZero() && !out.FinishedBefore.IsZero() && !out.FinishedAfter.Before(out.FinishedBefore) {
		return runs.Query{}, badRequest("finishedBefore is not after finishedAfter", "finishedBefore", "must be after finishedAfter")
	}
	for _, kv := range q["label"] {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if have, ok := out.Labels[k]; ok && have != v {
			return runs.Query{}, badRequest(fmt.Sprintf("label %s is asked with two values, %s and %s: no run has both", k, quoteShort(have), quoteShort(v)),
				"label", "must name each key once")
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[k] = v
	}
	if o := q.Get("origin"); o != "" {
		out.OriginKind, out.OriginName, _ = strings.Cut(o, "/")
	}
	if v := q.Get("limit"); v != "" {
		out.Limit, _ = strconv.Atoi(v) // checked: 1 to 1000
	}
	return out, nil
}

// listHistory answers a page of the path's workspace's run records.
func (s *Server) listHistory(r *http.Request) (any, error) {
	q, err := historyQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	q.Workspaces = []string{r.PathValue("ws")}
	page, err := s.opts.Runs.List(r.Context(), q)
	if err != nil {
		return nil, storeError("reading run records", err)
	}
	if page.Records == nil {
		page.Records = []runs.Record{}
	}
	return page, nil
}

// getHistory answers one record of the path's workspace: another workspace's record
// of the same kind and uid is not found, as one that does not exist.
func (s *Server) getHistory(r *http.Request) (any, error) {
	ws, kind, uid := r.PathValue("ws"), runs.Kind(r.PathValue("kind")), r.PathValue("uid")
	rec, err := s.opts.Runs.Get(r.Context(), ws, kind, uid)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("no %s run record %s in workspace %s", kind, uid, ws))
	}
	if err != nil {
		return nil, fmt.Errorf("reading run record %s/%s: %w", kind, uid, err)
	}
	return rec, nil
}

// lineage answers the runs under a checkpoint URI, or a schedule's runs and their
// descendants, in the path's workspace.
func (s *Server) lineage(r *http.Request) (any, error) {
	q := r.URL.Query()
	checkpoint, schedule := q.Get("checkpoint"), q.Get("schedule")
	if (checkpoint == "") == (schedule == "") {
		return nil, badRequest("lineage needs exactly one of checkpoint and schedule", "checkpoint",
			"give either checkpoint (a URI) or schedule (a name), not both nor neither")
	}
	ws := []string{r.PathValue("ws")}
	var l lineageWalk
	if checkpoint != "" {
		return l.answer(l.collect(r.Context(), s.opts.Runs, runs.Query{Workspaces: ws, Checkpoint: checkpoint}))
	}
	if err := l.collect(r.Context(), s.opts.Runs, runs.Query{Workspaces: ws, OriginKind: runs.OriginSchedule, OriginName: schedule}); err != nil {
		return nil, err
	}
	// The schedule's runs' descendants: an experiment's trials, a pipeline run's
	// steps (and a step experiment's trials), breadth first.
	for i := 0; i < len(l.out.Records) && !l.out.Truncated; i++ {
		if err := l.collect(r.Context(), s.opts.Runs, runs.Query{Workspaces: ws, Parent: l.out.Records[i].UID}); err != nil {
			return nil, err
		}
	}
	sortNewestFirst(l.out.Records)
	return l.answer(nil)
}

// lineageWalk collects the records of a lineage answer, each once, at most maxLineage.
type lineageWalk struct {
	out  api.Lineage
	seen map[string]bool
}

// collect adds every record of q's pages.
func (l *lineageWalk) collect(ctx context.Context, store runs.Store, q runs.Query) error {
	if l.seen == nil {
		l.seen = map[string]bool{}
		l.out.Records = []runs.Record{}
	}
	q.Limit = runs.MaxLimit
	for {
		page, err := store.List(ctx, q)
		if err != nil {
			return fmt.Errorf("reading run records: %w", err)
		}
		for _, rec := range page.Records {
			key := string(rec.Kind) + "/" + rec.UID
			if l.seen[key] {
				continue
			}
			if len(l.out.Records) == maxLineage {
				l.out.Truncated = true
				return nil
			}
			l.seen[key] = true
			l.out.Records = append(l.out.Records, rec)
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

func (l *lineageWalk) answer(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return l.out, nil
}

// sortNewestFirst orders records as the store does: by Finished, then uid, newest
// first.
func sortNewestFirst(recs []runs.Record) {
	slices.SortStableFunc(recs, func(a, b runs.Record) int {
		if c := b.Finished.Compare(a.Finished); c != 0 {
			return c
		}
		return strings.Compare(b.UID, a.UID)
	})
}

// usage answers the resource-hours of the workspaces the caller asks for and may
// read: a workspace's token its own workspace (another one asked is 403, naming it),
// a token of every workspace any (by default all).
func (s *Server) usage(r *http.Request) (any, error) {
	q := r.URL.Query()
	id, _ := IdentityFrom(r.Context())
	var wss []string
	for _, ws := range q["workspace"] {
		if ws == "" || slices.Contains(wss, ws) {
			continue
		}
		if !auth.InWorkspace(id, ws) {
			return nil, &httpError{http.StatusForbidden, api.Error{Code: api.CodePermissionDenied,
				Message: fmt.Sprintf("token %s belongs to workspace %s and cannot read the usage of workspace %s", id.Name, id.Workspace, ws),
				Details: []schemas.FieldError{{Field: "workspace", Detail: "must be the token's workspace, " + id.Workspace}}}}
		}
		wss = append(wss, ws)
	}
	switch {
	case slices.Contains(wss, api.AllWorkspaces):
		wss = nil // every workspace, for a token of every workspace
	case len(wss) == 0 && id.Workspace != api.AllWorkspaces:
		wss = []string{id.Workspace}
	}
	to := timeParam(q, "to")
	if to.IsZero() {
		to = time.Now().UTC()
	}
	from := timeParam(q, "from")
	if from.IsZero() {
		from = to.Add(-defaultUsageRange)
	}
	if !from.Before(to) {
		return nil, badRequest("to is not after from", "to", "must be after from")
	}
	if to.Sub(from) > maxUsageRange {
		return nil, badRequest(fmt.Sprintf("the range from %s to %s is longer than 366 days", from.Format(time.RFC3339), to.Format(time.RFC3339)),
			"from", "must be at most 366 days before to")
	}
	rows, err := s.opts.Runs.Usage(r.Context(), runs.UsageQuery{Workspaces: wss, From: from, To: to, GroupByLabel: q.Get("groupByLabel")})
	if err != nil {
		return nil, storeError("summing usage", err)
	}
	if rows == nil {
		rows = []runs.UsageRow{}
	}
	return api.Usage{From: from, To: to, Rows: rows}, nil
}

// storeError is a run record store's error as the API answers it: a query the store
// refuses (runs.ErrInvalid, such as a cursor it did not make) is the caller's 400,
// naming each parameter; anything else is the server's.
func storeError(what string, err error) error {
	var list schemas.ErrorList
	if errors.Is(err, runs.ErrInvalid) && errors.As(err, &list) && len(list) > 0 {
		details := make([]schemas.FieldError, len(list))
		for i, fe := range list {
			details[i] = *fe
		}
		return &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: err.Error(), Details: details}}
	}
	return fmt.Errorf("%s: %w", what, err)
}
