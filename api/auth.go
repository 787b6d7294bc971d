package api

import (
	"time"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/schemas"
)

// Role is what a token may do within its workspace.
type Role string

// Roles, from least to most powerful.
const (
	// RoleViewer reads: get, list, logs, events, rules.
	RoleViewer Role = "viewer"
	// RoleMember is a viewer who also submits, stops, deletes and clones jobs and
	// manages the workspace's notification rules.
	RoleMember Role = "member"
	// RoleWorkspaceAdmin is a member who also manages its own workspace's tokens
	// (viewer, member and workspace-admin tokens of that workspace, expiring no later
	// than its own), so the global admin token is not needed day to day.
	RoleWorkspaceAdmin Role = "workspace-admin"
	// RoleAdmin does everything in every workspace, including tokens, workspaces and
	// quotas. An admin token always has workspace AllWorkspaces.
	RoleAdmin Role = "admin"
)

// Roles lists every role, least powerful first.
var Roles = []Role{RoleViewer, RoleMember, RoleWorkspaceAdmin, RoleAdmin}

// JSONSchema lists the roles as an enum.
func (Role) JSONSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, r := range Roles {
		s.Enum = append(s.Enum, string(r))
	}
	return s
}

// AllWorkspaces is the workspace of admin tokens: every workspace.
const AllWorkspaces = "*"

// Identity is who a request's token says the caller is (GET /v1/whoami).
type Identity struct {
	// Name is the token's name; audit records show it.
	Name string `json:"name"`
	// Workspace the token belongs to; AllWorkspaces for an admin.
	Workspace string `json:"workspace"`
	Role      Role   `json:"role"`
	// ExpiresAt is when the token stops working; absent for the bootstrap admin token.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// TokenRequest creates a token (POST /v1/tokens; an admin, or a workspace admin for
// its own workspace).
type TokenRequest struct {
	// Name identifies the token in lists, audit records and revocation; a DNS label,
	// unique among tokens.
	Name string `json:"name"`
	// Workspace the token may act in; must exist. AllWorkspaces (with role admin) for
	// another admin.
	Workspace string `json:"workspace"`
	Role      Role   `json:"role"`
	// TTL is how long the token works, such as "720h"; default 720h (30 days), at
	// most 8784h (366 days). Ignored when ExpiresAt is set.
	TTL schemas.Duration `json:"ttl,omitempty"`
	// ExpiresAt, when set, is when the token stops working (at most 366 days ahead).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Token describes a stored token; the secret itself is never stored or returned
// again after creation.
type Token struct {
	Name      string     `json:"name"`
	Workspace string     `json:"workspace"`
	Role      Role       `json:"role"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	// CreatedBy is the name of the token that created this one.
	CreatedBy string `json:"createdBy,omitempty"`
}

// CreatedToken is the answer to a token creation: the only time the secret is shown.
type CreatedToken struct {
	Token
	// Secret is the bearer token to send as "Authorization: Bearer <secret>".
	Secret string `json:"secret"`
}

// TokenList is the tokens a caller may list: every one for an admin, its workspace's
// for a workspace admin.
type TokenList struct {
	Items []Token `json:"items"`
}

// Workspace is an entry of the workspace registry: a security boundary for jobs,
// rules, events and tokens.
type Workspace struct {
	// Name is a DNS label of at most 40 characters, as in metadata.workspace.
	Name string `json:"name"`
	// Namespace is the Kubernetes namespace the workspace's pods run in; default the
	// workspace's name.
	Namespace string `json:"namespace,omitempty"`
	// PodDefaults are the defaults of the workspace's pods (kubernetes backend): a
	// service account and image pull secrets of its namespace. A job's spec.pod comes
	// first, then these, then the pool's and the worker's. Like the namespace, they are
	// read when a job starts and kept for its life.
	PodDefaults *schemas.PodDefaults `json:"podDefaults,omitempty"`
	// Storage is where the workspace's documents may point in S3; default one prefix
	// of the stack's bucket (package storage).
	Storage     *WorkspaceStorage `json:"storage,omitempty"`
	Description string            `json:"description,omitempty"`
	CreatedAt   time.Time         `json:"createdAt,omitzero"`
	CreatedBy   string            `json:"createdBy,omitempty"`
}

// WorkspaceRequest is the body of a workspace's creation: a Workspace without what the
// server sets (createdAt, createdBy). It documents the request (docs/openapi.json).
type WorkspaceRequest struct {
	// Name is a DNS label of at most 40 characters, as in metadata.workspace.
	Name string `json:"name"`
	// Namespace is the Kubernetes namespace the workspace's pods run in; default the
	// workspace's name.
	Namespace string `json:"namespace,omitempty"`
	// PodDefaults are the defaults of the workspace's pods (kubernetes backend).
	PodDefaults *schemas.PodDefaults `json:"podDefaults,omitempty"`
	// Storage is where the workspace's documents may point in S3.
	Storage     *WorkspaceStorage `json:"storage,omitempty"`
	Description string            `json:"description,omitempty"`
}

// WorkspaceStorage is a workspace's S3 storage.
type WorkspaceStorage struct {
	// Locations are the buckets and prefixes (s3://bucket or s3://bucket/prefix) that
	// the workspace's documents may name and its replicas' credentials reach, in place
	// of the default one. At most 16.
	Locations []string `json:"locations,omitempty"`
}

// WorkspaceList is the workspaces a caller may see: all of them for an admin, its own
// otherwise.
type WorkspaceList struct {
	Items []Workspace `json:"items"`
}

// Error codes of authentication and authorization.
const (
	// CodeUnauthenticated (401): no token, or a malformed, unknown, revoked or expired
	// one.
	CodeUnauthenticated = "Unauthenticated"
	// CodePermissionDenied (403): the token's role may not do this, or a document names
	// another workspace than the token's. A request for another workspace's object is
	// answered NotFound instead, so that nobody learns what exists there.
	CodePermissionDenied = "PermissionDenied"
	// CodeMethodNotAllowed (405): the path exists but not with this method.
	CodeMethodNotAllowed = "MethodNotAllowed"
)
