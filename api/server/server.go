// Package server is OpenDLC's JSON-over-HTTP API in front of Temporal (state) and NATS
// JetStream (logs). The CLI and the Go SDK talk only to it, so authentication and
// workspaces live in one place.
package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// Options configure a Server. What it serves is its service's (New): the rules and
// triggers routes are served when the service has them, and the storage policy, the
// Temporal namespace and the task queue are the service's.
type Options struct {
	MaxBodySize int64
	Logger      *slog.Logger
	Auth        *auth.Store
	// RateLimits bound failed authentication and anonymous audit records per address.
	RateLimits RateLimits
	// Metrics records requests (WithMetrics); nil records nothing.
	Metrics *metrics.Registry
	// LogArchive reads finished jobs' archived logs (WithLogArchive); nil reads the
	// log stream only.
	LogArchive *logarchive.Store
	// WebhookSecrets resolves triggers' webhook secretRefs (WithWebhookSecrets).
	WebhookSecrets notify.SecretSource
	// Runs reads run records: history, lineage and usage (WithRuns); nil: those
	// routes answer 503.
	Runs runs.Store
}

// Option changes Options.
type Option func(*Options)

// WithMaxBodySize bounds request bodies. Default 1 MiB.
func WithMaxBodySize(n int64) Option { return func(o *Options) { o.MaxBodySize = n } }

// WithAuth authenticates requests with the tokens of store (the store the service's
// workspaces and tokens are served from: service.Config.Auth). Default none: every
// request but /healthz is refused with 503, so a server cannot be started open by
// mistake.
func WithAuth(store *auth.Store) Option { return func(o *Options) { o.Auth = store } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// Server serves the API.
type Server struct {
	// svc is the domain layer: every kind's operations over Temporal.
	svc  *service.Service
	ev   *jetstream.Client
	opts Options
	// authn checks tokens (opts.Auth unless a test sets another); auditPub publishes
	// audit events (ev when set).
	authn    authenticator
	auditPub publisher
	// limits are the per-address abuse limits (ratelimit.go).
	limits *abuseLimiter
	// served is the mux of the latest Handler, for tests.
	served *routeMux
}

// New returns a Server in front of svc, the process's services: the composition root
// (package app) builds them once (service.Compose) for every front end of the
// process. ev is JetStream, for the event, log and audit routes; nil: those answer
// 503.
func New(svc *service.Service, ev *jetstream.Client, opts ...Option) *Server {
	o := Options{MaxBodySize: 1 << 20, Logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{ev: ev, opts: o, svc: svc}
	if o.Auth != nil {
		s.authn = o.Auth
	}
	if ev != nil {
		s.auditPub = ev
	}
	s.limits = newAbuseLimiter(o.RateLimits, s.auditSuppressed)
	return s
}

// Handler returns the HTTP routes (the table in routes.go), behind authentication and
// audit (auth.go). Register new routes in the table, not here: the OpenAPI document is
// generated from it and a test refuses routes it does not list.
func (s *Server) Handler() http.Handler {
	mux := s.tableMux()
	return s.instrument(refuseDotSegments(s.withAuth(mux)), mux)
}

// document is a decoded document of any kind: it validates itself.
type document interface{ Validate() schemas.ErrorList }

// decodeDoc decodes body with decode and validates the document, as /v1/validate
// does; what fails is a spec error.
func decodeDoc[D document](body []byte, decode func([]byte) (D, error)) (D, error) {
	doc, err := schemas.DecodeValid(body, decode)
	if err != nil {
		var none D
		return none, specError(err)
	}
	return doc, nil
}

// readDoc reads the request body and decodes it as decodeDoc does.
func readDoc[D document](s *Server, r *http.Request, decode func([]byte) (D, error)) (D, error) {
	body, err := s.readBody(r)
	if err != nil {
		var none D
		return none, err
	}
	return decodeDoc(body, decode)
}

// readSpec reads, decodes and validates a job spec from the body.
func (s *Server) readSpec(r *http.Request) (*schemas.TrainingJob, error) {
	return readDoc(s, r, schemas.DecodeTrainingJob)
}

// decodeSpec decodes and validates a job spec; a bad one is a spec error.
func decodeSpec(body []byte) (*schemas.TrainingJob, error) {
	return decodeDoc(body, schemas.DecodeTrainingJob)
}

// readBody reads a request body of at most MaxBodySize bytes (413 when larger).
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(writerOf(r), r.Body, s.opts.MaxBodySize))
	if err != nil {
		return nil, bodyReadError(err, s.opts.MaxBodySize)
	}
	return body, nil
}

func (s *Server) validate(r *http.Request) (any, error) {
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	if err := validateDocument(body); err != nil {
		return nil, specError(err)
	}
	return api.ValidateResult{Valid: true}, nil
}

func (s *Server) submitJob(r *http.Request) (any, error) {
	job, err := s.readSpec(r)
	if err != nil {
		return nil, err
	}
	ws := job.Metadata.Workspace
	if err := s.inWorkspace(r, ws, "job "+ws+"/"+job.Metadata.Name); err != nil {
		return nil, err
	}
	return s.svc.Jobs.Start(r.Context(), job)
}

func (s *Server) getJob(r *http.Request) (any, error) {
	return s.jobView(r)
}

// listOptions reads the paging and filter parameters of a list route.
func listOptions(r *http.Request) (service.ListOptions, error) {
	q := r.URL.Query()
	limit, err := service.ParseLimit(q.Get("limit"))
	return service.ListOptions{Limit: limit, PageToken: q.Get("pageToken"), Phase: q.Get("phase"),
		Framework: q.Get("framework"), Labels: q["label"]}, err
}

// listIn answers a list route: the query's list options, then list in the path's
// workspace.
func listIn[L any](r *http.Request, list func(context.Context, string, service.ListOptions) (L, error)) (any, error) {
	o, err := listOptions(r)
	if err != nil {
		return nil, err
	}
	return list(r.Context(), r.PathValue("ws"), o)
}

// Whether actOn accepts an empty request body (leaving the request its zero value).
const (
	optionalBody = true
	requiredBody = false
)

// actOn answers an action on the object the path names: the JSON body, at most
// smallBodyLimit bytes, decoded strictly into a Req, then act.
func actOn[Req, Res any](r *http.Request, allowEmpty bool, act func(context.Context, string, string, Req) (Res, error)) (any, error) {
	var req Req
	if err := decodeJSON(r, &req, smallBodyLimit, allowEmpty); err != nil {
		return nil, err
	}
	return act(r.Context(), r.PathValue("ws"), r.PathValue("name"), req)
}

func (s *Server) listJobs(r *http.Request) (any, error) {
	return listIn(r, s.svc.Jobs.List)
}

func (s *Server) stopJob(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Jobs.Stop)
}

func (s *Server) deleteJob(r *http.Request) (any, error) {
	return nil, s.svc.Jobs.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"),
		service.DeleteOptions{Purge: isTrue(r.URL.Query().Get("purge"))})
}

// jobLogs streams a job's log records as JSON lines, read back from JetStream so logs
// stay readable after the replicas are gone. With follow=true it streams until the job
// is terminal and every line has been sent.
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) error {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	view, err := s.jobView(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	follow := q.Get("follow") == "true" || q.Get("follow") == "1"
	filter := events.JobLogsFilter(ws, name)
	replica := q.Get("replica")
	if replica != "" {
		role, index, ok := splitReplica(view, replica)
		if !ok {
			return badRequest("unknown replica", "replica", "must name a replica of the job, such as worker-0")
		}
		filter = events.JobLogSubject(ws, name, role, index)
	}
	if ok, err := s.archivedLogs(w, r, view, replica); ok || err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		// The headers now, not with the first line: a client of a followed stream
		// with nothing in it yet would wait inside its request.
		flusher.Flush()
	}
	ctx := r.Context()

	var done func() bool
	if follow {
		var terminal atomic.Bool
		terminal.Store(view.Status.Phase.Terminal())
		go func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for !terminal.Load() {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if s.svc.Jobs.Terminal(ctx, ws, name) {
						terminal.Store(true)
					}
				}
			}
		}()
		done = terminal.Load
	}
	enc := json.NewEncoder(w)
	err = s.ev.ReadUntil(ctx, jetstream.LogsStream, filter, done, func(_ string, data []byte) error {
		var rec events.LogRecord
		if json.Unmarshal(data, &rec) != nil || rec.UID != view.UID {
			return nil //nolint:nilerr // not a record of this run: skip it
		}
		if err := enc.Encode(rec); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.opts.Logger.Warn("log stream ended with an error", "job", name, "error", err)
	}
	return nil
}

// workspaceEvents streams a workspace's events (status and metrics) as JSON lines, from
// `since` ago (default 1h). Filters: type (an event type), job (a job name). With
// follow=true it keeps streaming until the client goes away.
func (s *Server) workspaceEvents(w http.ResponseWriter, r *http.Request) error {
	ws := r.PathValue("ws")
	q := r.URL.Query()
	since := time.Hour
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return badRequest("invalid since", "since", "must be a duration such as 10m or 24h")
		}
		since = d
	}
	filter := fmt.Sprintf("dlc.%s.>", ws)
	if job := q.Get("job"); job != "" {
		filter = fmt.Sprintf("dlc.%s.job.%s.*", ws, job)
	}
	typ := q.Get("type")
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the headers now, as jobLogs
	}
	var done func() bool
	if q.Get("follow") == "true" || q.Get("follow") == "1" {
		done = func() bool { return false }
	}
	err := s.ev.ReadSince(r.Context(), jetstream.EventsStream, filter, time.Now().Add(-since), done,
		func(_ string, data []byte) error {
			var ev events.Event
			if json.Unmarshal(data, &ev) != nil || (typ != "" && ev.Type != typ) {
				return nil //nolint:nilerr // unreadable or filtered out: skip it
			}
			if _, err := w.Write(append(data, '\n')); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
	if err != nil && r.Context().Err() == nil {
		s.opts.Logger.Warn("event stream ended with an error", "workspace", ws, "error", err)
	}
	return nil
}

// splitReplica maps "worker-0" (role-index) or a full replica name to role and index.
func splitReplica(view api.Job, replica string) (string, int, bool) {
	for _, r := range view.Status.Replicas {
		if r.Name == replica || fmt.Sprintf("%s-%d", r.Role, r.Index) == replica {
			return r.Role, r.Index, true
		}
	}
	for role, rs := range view.Spec.Spec.Roles {
		for i := 0; i < int(rs.Replicas); i++ {
			if fmt.Sprintf("%s-%d", role, i) == replica {
				return role, i, true
			}
		}
	}
	return "", 0, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, e api.Error) {
	if rec, ok := w.(*recorder); ok {
		rec.code = e.Code
	}
	writeJSON(w, status, api.ErrorBody{Error: e})
}
