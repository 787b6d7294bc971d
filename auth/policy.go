package auth

import (
	"slices"

	"github.com/opendlc/opendlc/api"
)

// Verb is the kind of access a request needs.
type Verb string

// Verbs.
const (
	// VerbRead: get, list, logs, events, validate.
	VerbRead Verb = "read"
	// VerbWrite: submit, stop, delete, clone; apply and delete notification rules.
	VerbWrite Verb = "write"
	// VerbTokens: create, list and revoke the workspace's tokens.
	VerbTokens Verb = "tokens"
	// VerbAdmin: workspaces, quotas, and tokens of every workspace.
	VerbAdmin Verb = "admin"
)

// roleVerbs is the whole policy: what each role may do within its workspace.
var roleVerbs = map[api.Role][]Verb{
	api.RoleViewer:         {VerbRead},
	api.RoleMember:         {VerbRead, VerbWrite},
	api.RoleWorkspaceAdmin: {VerbRead, VerbWrite, VerbTokens},
	api.RoleAdmin:          {VerbRead, VerbWrite, VerbTokens, VerbAdmin},
}

// Allows reports whether role may do verb.
func Allows(role api.Role, verb Verb) bool {
	return slices.Contains(roleVerbs[role], verb)
}

// InWorkspace reports whether id may act in workspace ws at all.
func InWorkspace(id api.Identity, ws string) bool {
	return id.Workspace == api.AllWorkspaces || id.Workspace == ws
}

// ValidRole reports whether r is one of api.Roles.
func ValidRole(r api.Role) bool { return slices.Contains(api.Roles, r) }
