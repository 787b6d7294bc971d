package server

import (
	"fmt"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/workflows"
)

// Nodes: their health verdicts and quarantine (service.Nodes). Nodes belong to no
// workspace; their events are published under the reserved workspace "system", which
// only a token of every workspace reaches. So reading nodes needs the read verb with a
// token of every workspace (as reading their events does), and releasing a node from
// quarantine the admin role with a token of every workspace: a cluster administrator.
// A workspace's token is refused with 403 before anything is read or changed.

// nodeAccess checks that the caller's token is of every workspace (the router checked
// its role) and notes the node for the audit record.
func nodeAccess(r *http.Request, name string) error {
	note(r, workflows.NodeEventsWorkspace, name)
	id, ok := IdentityFrom(r.Context())
	if ok && id.Workspace == api.AllWorkspaces {
		return nil
	}
	return &httpError{http.StatusForbidden, api.Error{Code: api.CodePermissionDenied,
		Message: fmt.Sprintf("token %s belongs to workspace %s: nodes belong to no workspace, only a token of every workspace (%s) may read them, and an admin's release them",
			id.Name, id.Workspace, api.AllWorkspaces)}}
}

// listNodes answers every node's latest health verdict and quarantine state.
func (s *Server) listNodes(r *http.Request) (any, error) {
	if err := nodeAccess(r, ""); err != nil {
		return nil, err
	}
	return s.svc.Nodes.List(r.Context())
}

// getNode answers one node's.
func (s *Server) getNode(r *http.Request) (any, error) {
	if err := nodeAccess(r, r.PathValue("name")); err != nil {
		return nil, err
	}
	return s.svc.Nodes.Get(r.Context(), r.PathValue("name"))
}

// releaseNode releases a node from quarantine (a cluster administrator).
func (s *Server) releaseNode(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := nodeAccess(r, name); err != nil {
		return nil, err
	}
	var req api.NodeRelease
	if err := decodeJSON(r, &req, s.opts.MaxBodySize, true); err != nil {
		return nil, err
	}
	id, _ := IdentityFrom(r.Context())
	return s.svc.Nodes.Release(r.Context(), name, id.Name, req.Reason)
}
