package server

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	"github.com/opendlc/opendlc/events"
)

// publisher is what auditing needs of JetStream; *jetstream.Client is the real one.
type publisher interface {
	Publish(ctx context.Context, msgs ...events.Msg) error
}

// auditTimeout bounds the publishing of one audit event (retries included): an
// outage of NATS longer than this loses the audit events of the calls made meanwhile
// (they are still in the server's log).
const auditTimeout = 5 * time.Minute

var wsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// audit records a mutating call, whatever its outcome: in the log, and as an event on
// dlc.<workspace>.audit (workspace "system" when the call concerns none). The event's
// Nats-Msg-Id is derived from the request id, so a retried publish is stored once.
// Tokens and bodies are never recorded.
func (s *Server) audit(r *http.Request, st *request, rec *recorder, start time.Time) {
	if st.route != nil && !st.route.mutating() || st.route == nil && !mutatingMethod(r.Method) {
		return
	}
	if !s.auditAllowed(r, st) {
		return
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	data := events.AuditData{
		RequestID:  st.id,
		Actor:      "anonymous",
		Method:     r.Method,
		Route:      st.pattern,
		Path:       r.URL.Path,
		Object:     st.object,
		RemoteAddr: r.RemoteAddr,
		Status:     status,
		Code:       rec.code,
		DurationMs: time.Since(start).Milliseconds(),
	}
	if st.authenticated {
		data.Actor, data.ActorWorkspace, data.ActorRole = st.identity.Name, st.identity.Workspace, string(st.identity.Role)
	}
	ws := st.workspace
	if ws == "" {
		ws = pathWorkspace(r.URL.Path)
	}
	if data.Object == "" {
		data.Object = pathObject(r, st)
	}
	if !wsLabelRE.MatchString(ws) || len(ws) > 63 {
		ws = "system"
	}
	s.opts.Logger.Info("audit", "request", data.RequestID, "actor", data.Actor, "method", data.Method,
		"route", data.Route, "object", data.Object, "workspace", ws, "remote", data.RemoteAddr, "status", data.Status)
	s.publishAudit(ws, st.id, start, data)
}

// publishAudit publishes an audit record on ws's audit subject, without holding up
// the caller. The event's id is derived from id, so a retried publish is stored once.
func (s *Server) publishAudit(ws, id string, start time.Time, data events.AuditData) {
	if s.auditPub == nil {
		return
	}
	ev, err := events.New("audit:"+id, events.TypeAudit, ws, events.AuditSource, events.AuditSubject(ws), start, data)
	if err != nil {
		s.opts.Logger.Error("audit event", "error", err)
		return
	}
	body, err := json.Marshal(ev)
	if err != nil {
		s.opts.Logger.Error("audit event", "error", err)
		return
	}
	msg := events.Msg{Subject: events.AuditSubject(ws), ID: ev.ID, Data: body}
	// Publishing must not hold up the answer; the deterministic id makes the retries
	// safe.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
		defer cancel()
		for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
			err := s.auditPub.Publish(ctx, msg)
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				s.opts.Logger.Error("audit event lost", "request", id, "error", err)
				return
			case <-time.After(backoff):
			}
		}
	}()
}

func mutatingMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// pathObject describes what a path names: "job vision/resnet", "token ci".
func pathObject(r *http.Request, st *request) string {
	name := r.PathValue("name")
	if name == "" {
		return ""
	}
	object := "object"
	if st.route != nil && st.route.object != "" {
		object = st.route.object
	}
	if ws := r.PathValue("ws"); ws != "" {
		return object + " " + ws + "/" + name
	}
	return object + " " + name
}
