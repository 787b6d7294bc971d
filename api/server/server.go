// Package server is OpenDLC's JSON-over-HTTP API in front of Temporal (state) and NATS
// JetStream (logs). The CLI and the Go SDK talk only to it, so authentication and
// workspaces live in one place.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workflows"
)

// Options configure a Server.
type Options struct {
	Namespace   string
	TaskQueue   string
	MaxBodySize int64
	Logger      *slog.Logger
	Rules       *notify.Store
	Auth        *auth.Store
	Triggers    *triggers.Store
}

// Option changes Options.
type Option func(*Options)

// WithNamespace sets the Temporal namespace. Default "default".
func WithNamespace(ns string) Option { return func(o *Options) { o.Namespace = ns } }

// WithTaskQueue sets the task queue jobs run on. Default workflows.TaskQueue.
func WithTaskQueue(q string) Option { return func(o *Options) { o.TaskQueue = q } }

// WithMaxBodySize bounds request bodies. Default 1 MiB.
func WithMaxBodySize(n int64) Option { return func(o *Options) { o.MaxBodySize = n } }

// WithRules serves notification rules from store. Default: no rule routes.
func WithRules(store *notify.Store) Option { return func(o *Options) { o.Rules = store } }

// WithAuth authenticates requests with the tokens of store and serves the token and
// workspace routes from it. Default none: every request but /healthz is refused with
// 503, so a server cannot be started open by mistake.
func WithAuth(store *auth.Store) Option { return func(o *Options) { o.Auth = store } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// Server serves the API.
type Server struct {
	tc   client.Client
	ev   *jetstream.Client
	opts Options
	// authn checks tokens (opts.Auth unless a test sets another); auditPub publishes
	// audit events (ev when set).
	authn    authenticator
	auditPub publisher
	// served is the mux of the latest Handler, for tests.
	served *routeMux
}

// New returns a Server using a Temporal client and a JetStream client.
func New(tc client.Client, ev *jetstream.Client, opts ...Option) *Server {
	o := Options{Namespace: "default", TaskQueue: workflows.TaskQueue, MaxBodySize: 1 << 20, Logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{tc: tc, ev: ev, opts: o}
	if o.Auth != nil {
		s.authn = o.Auth
	}
	if ev != nil {
		s.auditPub = ev
	}
	return s
}

// Handler returns the HTTP routes (the table in routes.go), behind authentication and
// audit (auth.go). Register new routes in the table, not here: the OpenAPI document is
// generated from it and a test refuses routes it does not list.
func (s *Server) Handler() http.Handler {
	mux := s.tableMux()
	return s.withAuth(mux)
}

// readSpec reads and decodes a job spec from the body; on failure it has written the
// error response and returns nil.
func (s *Server) readSpec(w http.ResponseWriter, r *http.Request) *schemas.TrainingJob {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil
	}
	job, err := schemas.DecodeTrainingJob(body)
	if err == nil {
		err = job.Validate().Err()
	}
	if err == nil {
		err = supported(job)
	}
	if err != nil {
		writeSpecError(w, err)
		return nil
	}
	return job
}

// supported checks what the schema allows but this server cannot run yet.
func supported(job *schemas.TrainingJob) error {
	if _, err := frameworks.Get(job.Spec.Framework); err != nil {
		return schemas.ErrorList{schemas.NotSupported(schemas.NewPath("spec", "framework"), frameworks.Supported())}
	}
	return nil
}

// readBody reads a request body of at most MaxBodySize bytes; on failure it has
// written the error response (413 when too large).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodySize))
	if err == nil {
		return body, true
	}
	bodyReadError(w, err, s.opts.MaxBodySize)
	return nil, false
}

func writeSpecError(w http.ResponseWriter, err error) {
	var list schemas.ErrorList
	if errors.As(err, &list) {
		details := make([]schemas.FieldError, len(list))
		for i, fe := range list {
			details[i] = *fe
		}
		writeError(w, http.StatusUnprocessableEntity, api.Error{Code: api.CodeInvalidSpec,
			Message: fmt.Sprintf("the spec has %d problem(s)", len(list)), Details: details})
		return
	}
	// A problem with the document as a whole (not YAML or JSON, empty, too large).
	writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidSpec, Message: err.Error(),
		Details: []schemas.FieldError{{Field: bodyField, Detail: err.Error()}}})
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbRead) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if err := validateDocument(body); err != nil {
		writeSpecError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ValidateResult{Valid: true})
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) {
	if job := s.readSpec(w, r); job != nil {
		note(r, job.Metadata.Workspace, "job "+job.Metadata.Workspace+"/"+job.Metadata.Name)
		if !s.authorize(w, r, job.Metadata.Workspace, auth.VerbWrite) {
			return
		}
		s.start(w, r, job)
	}
}

// start starts a validated job's workflow and answers 201 with the job.
func (s *Server) start(w http.ResponseWriter, r *http.Request, job *schemas.TrainingJob) {
	ws, name := job.Metadata.Workspace, job.Metadata.Name
	run, err := s.tc.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:                       workflows.JobWorkflowID(ws, name),
		TaskQueue:                s.opts.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK answers a duplicate with the existing run instead of an
		// error.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.WorkspaceKey.ValueSet(ws),
			workflows.KindKey.ValueSet(string(schemas.KindTrainingJob)),
			workflows.NameKey.ValueSet(name),
			workflows.PhaseKey.ValueSet(string(schemas.JobPending)),
			workflows.FrameworkKey.ValueSet(string(job.Spec.Framework)),
			workflows.LabelsKey.ValueSet(workflows.LabelKeywords(job.Metadata.Labels)),
		),
	}, workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: *job})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			writeError(w, http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
				Message: fmt.Sprintf("job %s already exists in workspace %s; delete it first or choose another name", name, ws)})
			return
		}
		s.internal(w, "start job", err)
		return
	}
	s.opts.Logger.Info("job submitted", "workspace", ws, "job", name, "uid", run.GetRunID())
	writeJSON(w, http.StatusCreated, api.Job{UID: run.GetRunID(), Spec: *job,
		Status: schemas.JobStatus{Phase: schemas.JobPending}})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbRead) {
		return
	}
	view, ok := s.lookup(w, r)
	if ok {
		writeJSON(w, http.StatusOK, view)
	}
}

// lookup queries a job's status; on failure it has written the error response.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (api.Job, bool) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	view, err := s.queryJob(r.Context(), ws, name)
	if err != nil {
		if isNotFound(err) {
			jobNotFound(w, ws, name)
			return api.Job{}, false
		}
		s.internal(w, "query job", err)
		return api.Job{}, false
	}
	return view, true
}

func (s *Server) queryJob(ctx context.Context, ws, name string) (api.Job, error) {
	v, err := s.tc.QueryWorkflow(ctx, workflows.JobWorkflowID(ws, name), "", workflows.QueryStatus)
	if err != nil {
		return api.Job{}, err
	}
	var view workflows.JobView
	if err := v.Get(&view); err != nil {
		return api.Job{}, err
	}
	return api.Job{UID: view.UID, Spec: view.Job, Status: view.Status}, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	pageSize := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument,
				Details: []schemas.FieldError{{Field: "limit", Detail: "must be an integer between 1 and 1000"}},
				Message: "invalid limit"})
			return
		}
		pageSize = n
	}
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.SearchAttrKind, string(schemas.KindTrainingJob),
		workflows.SearchAttrWorkspace, ws)
	if phase := r.URL.Query().Get("phase"); phase != "" {
		query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrPhase, phase)
	}
	if fw := r.URL.Query().Get("framework"); fw != "" {
		query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrFramework, fw)
	}
	for _, l := range r.URL.Query()["label"] {
		if !strings.Contains(l, "=") {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid label filter",
				Details: []schemas.FieldError{{Field: "label", Detail: "must be key=value"}}})
			return
		}
		query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrLabels, l)
	}
	resp, err := s.tc.ListWorkflow(r.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace:     s.opts.Namespace,
		PageSize:      int32(pageSize),
		NextPageToken: []byte(r.URL.Query().Get("pageToken")),
		Query:         query,
	})
	if err != nil {
		s.internal(w, "list jobs", err)
		return
	}
	list := api.JobList{Items: []api.JobSummary{}, NextPageToken: string(resp.NextPageToken)}
	dc := converter.GetDefaultDataConverter()
	for _, e := range resp.Executions {
		sum := api.JobSummary{Workspace: ws, UID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime()}
		fields := e.GetSearchAttributes().GetIndexedFields()
		_ = dc.FromPayload(fields[workflows.SearchAttrName], &sum.Name)
		var phase string
		_ = dc.FromPayload(fields[workflows.SearchAttrPhase], &phase)
		sum.Phase = schemas.JobPhase(phase)
		if e.GetCloseTime() != nil {
			t := e.GetCloseTime().AsTime()
			sum.EndTime = &t
			if !sum.Phase.Terminal() {
				// Closed without reaching a terminal phase: terminated by an operator.
				sum.Phase = schemas.JobFailed
			}
		}
		list.Items = append(list.Items, sum)
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) stopJob(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	var req workflows.StopRequest
	if !decodeJSON(w, r, &req, smallBodyLimit, true) {
		return
	}
	res, err := s.stop(r.Context(), ws, name, req)
	if err != nil {
		if isNotFound(err) {
			jobNotFound(w, ws, name)
			return
		}
		s.internal(w, "stop job", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// stop asks the job to stop and waits until it is terminal. A job that has already
// finished answers with its final phase.
func (s *Server) stop(ctx context.Context, ws, name string, req workflows.StopRequest) (api.StopResult, error) {
	id := workflows.JobWorkflowID(ws, name)
	handle, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdateStop,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var res workflows.StopResult
		if err = handle.Get(ctx, &res); err == nil {
			return api.StopResult{Phase: res.Phase}, nil
		}
	}
	// A job that has already finished (or is finishing) cannot take the update: answer
	// with its final phase.
	view, qerr := s.queryJob(ctx, ws, name)
	if qerr == nil && view.Status.Phase.Terminal() {
		return api.StopResult{Phase: view.Status.Phase}, nil
	}
	return api.StopResult{}, err
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	id := workflows.JobWorkflowID(ws, name)
	desc, err := s.tc.DescribeWorkflowExecution(r.Context(), id, "")
	if err != nil {
		if isNotFound(err) {
			jobNotFound(w, ws, name)
			return
		}
		s.internal(w, "describe job", err)
		return
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if _, err := s.stop(r.Context(), ws, name, workflows.StopRequest{Reason: "deleted"}); err != nil {
			s.internal(w, "stop job before delete", err)
			return
		}
	}
	_, err = s.tc.WorkflowService().DeleteWorkflowExecution(r.Context(), &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace:         s.opts.Namespace,
		WorkflowExecution: desc.GetWorkflowExecutionInfo().GetExecution(),
	})
	if err != nil && !isNotFound(err) {
		s.internal(w, "delete job", err)
		return
	}
	// Temporal deletes asynchronously; answer once the job is really gone so that a
	// get or a new submit with the same name right after behaves as the user expects.
	if err := s.waitDeleted(r.Context(), id); err != nil {
		s.internal(w, "delete job", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// waitDeleted polls until the execution is gone, for at most 30 seconds.
func (s *Server) waitDeleted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := s.tc.DescribeWorkflowExecution(ctx, id, "")
		if isNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still exists after delete: %w", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// jobLogs streams a job's log records as JSON lines, read back from JetStream so logs
// stay readable after the replicas are gone. With follow=true it streams until the job
// is terminal and every line has been sent.
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	view, ok := s.lookup(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	follow := q.Get("follow") == "true" || q.Get("follow") == "1"
	filter := events.JobLogsFilter(ws, name)
	replica := q.Get("replica")
	if replica != "" {
		role, index, ok := splitReplica(view, replica)
		if !ok {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument,
				Message: "unknown replica",
				Details: []schemas.FieldError{{Field: "replica", Detail: "must name a replica of the job, such as worker-0"}},
			})
			return
		}
		filter = events.JobLogSubject(ws, name, role, index)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
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
					if v, err := s.queryJob(ctx, ws, name); err == nil && v.Status.Phase.Terminal() {
						terminal.Store(true)
					}
				}
			}
		}()
		done = terminal.Load
	}
	enc := json.NewEncoder(w)
	err := s.ev.ReadUntil(ctx, jetstream.LogsStream, filter, done, func(_ string, data []byte) error {
		var rec events.LogRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.UID != view.UID {
			return nil
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
}

// workspaceEvents streams a workspace's events (status and metrics) as JSON lines, from
// `since` ago (default 1h). Filters: type (an event type), job (a job name). With
// follow=true it keeps streaming until the client goes away.
func (s *Server) workspaceEvents(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	q := r.URL.Query()
	since := time.Hour
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid since",
				Details: []schemas.FieldError{{Field: "since", Detail: "must be a duration such as 10m or 24h"}}})
			return
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
	var done func() bool
	if q.Get("follow") == "true" || q.Get("follow") == "1" {
		done = func() bool { return false }
	}
	err := s.ev.ReadSince(r.Context(), jetstream.EventsStream, filter, time.Now().Add(-since), done,
		func(_ string, data []byte) error {
			var ev events.Event
			if err := json.Unmarshal(data, &ev); err != nil || (typ != "" && ev.Type != typ) {
				return nil
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

func (s *Server) internal(w http.ResponseWriter, what string, err error) {
	s.opts.Logger.Error(what, "error", err)
	code, status := api.CodeInternal, http.StatusInternalServerError
	var unavailable *serviceerror.Unavailable
	if errors.As(err, &unavailable) || errors.Is(err, context.DeadlineExceeded) {
		code, status = api.CodeUnavailable, http.StatusServiceUnavailable
	}
	writeError(w, status, api.Error{Code: code, Message: what + ": " + err.Error()})
}

func jobNotFound(w http.ResponseWriter, ws, name string) {
	writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
		Message: fmt.Sprintf("job %s not found in workspace %s", name, ws)})
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
