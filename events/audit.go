package events

import "fmt"

// TypeAudit is the type of the event sent when a mutating API call was answered
// (whether it succeeded or was refused). Data: AuditData. Audit events travel on dlc.<workspace>.audit, in their own stream, so
// that readers of a workspace's job events do not receive them.
const TypeAudit = "opendlc.audit.v1"

// AuditSubjects is the subject filter of every audit subject.
const AuditSubjects = "dlc.*.audit"

// AuditData is the data of a TypeAudit event: who did what, when (the event's time),
// from where, and how it ended. It never holds a token or a request body.
type AuditData struct {
	// RequestID is the API server's id of the request (X-Request-Id).
	RequestID string `json:"requestId"`
	// Actor is the name of the token used; "anonymous" when none was accepted.
	Actor string `json:"actor"`
	// ActorWorkspace and ActorRole are the token's workspace and role.
	ActorWorkspace string `json:"actorWorkspace,omitempty"`
	ActorRole      string `json:"actorRole,omitempty"`
	// Method and Route are the HTTP method and the route pattern, such as
	// "POST /v1/workspaces/{ws}/jobs/{name}/stop"; Path is the request path.
	Method string `json:"method"`
	Route  string `json:"route,omitempty"`
	Path   string `json:"path"`
	// Object names what was acted on, such as "job vision/resnet" or "token ci".
	Object string `json:"object,omitempty"`
	// RemoteAddr is the caller's address as the server saw it.
	RemoteAddr string `json:"remoteAddr"`
	// Status is the HTTP status answered; Code the API error code when it failed.
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	// DurationMs is how long the call took.
	DurationMs int64 `json:"durationMs"`
	// Suppressed, in a summary record, counts the refused anonymous calls from
	// RemoteAddr that were not audited one by one (the per-address audit limit);
	// Summary says so in words.
	Suppressed int64  `json:"suppressed,omitempty"`
	Summary    string `json:"summary,omitempty"`
}

// AuditSubject carries a workspace's audit events; calls that concern no workspace
// (tokens, the workspace registry, refused anonymous calls) are published under the
// reserved workspace "system".
func AuditSubject(workspace string) string {
	return fmt.Sprintf("dlc.%s.audit", workspace)
}

// AuditSource is the CloudEvents source of audit events.
const AuditSource = "/opendlc/api"
