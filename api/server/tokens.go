package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// smallBodyLimit bounds the JSON bodies of token, workspace, stop and clone requests.
const smallBodyLimit = 64 << 10

func (s *Server) whoami(r *http.Request) (any, error) {
	id, _ := IdentityFrom(r.Context())
	return id, nil
}

func (s *Server) createToken(r *http.Request) (any, error) {
	tokens := s.svc.Tokens
	var req api.TokenRequest
	if err := decodeJSON(r, &req, smallBodyLimit, false); err != nil {
		return nil, err
	}
	ws := req.Workspace
	if ws == api.AllWorkspaces {
		ws = ""
	}
	note(r, ws, "token "+req.Name)
	id, _ := IdentityFrom(r.Context())
	tok, err := tokens.Create(r.Context(), req, id)
	if err != nil {
		return nil, err
	}
	// Never the secret: only who made which token.
	s.opts.Logger.Info("token created", "token", tok.Name, "workspace", tok.Workspace, "role", tok.Role, "by", id.Name)
	return tok, nil
}

func (s *Server) listTokens(r *http.Request) (any, error) {
	tokens := s.svc.Tokens
	id, _ := IdentityFrom(r.Context())
	return tokens.List(r.Context(), r.URL.Query().Get("workspace"), id)
}

func (s *Server) revokeToken(r *http.Request) (any, error) {
	tokens := s.svc.Tokens
	id, _ := IdentityFrom(r.Context())
	return nil, tokens.Revoke(r.Context(), r.PathValue("name"), id)
}

func (s *Server) createWorkspace(r *http.Request) (any, error) {
	workspaces := s.svc.Workspaces
	var ws api.Workspace
	if err := decodeJSON(r, &ws, smallBodyLimit, false); err != nil {
		return nil, err
	}
	note(r, "", "workspace "+ws.Name)
	id, _ := IdentityFrom(r.Context())
	return workspaces.Create(r.Context(), ws, id.Name)
}

func (s *Server) listWorkspaces(r *http.Request) (any, error) {
	workspaces := s.svc.Workspaces
	id, _ := IdentityFrom(r.Context())
	return workspaces.List(r.Context(), id)
}

func (s *Server) getWorkspace(r *http.Request) (any, error) {
	workspaces := s.svc.Workspaces
	return workspaces.Get(r.Context(), r.PathValue("ws"))
}

// deleteWorkspace deletes a workspace that holds nothing any more and revokes its
// tokens; one that still holds jobs, experiments, pipelines or schedules is 409.
func (s *Server) deleteWorkspace(r *http.Request) (any, error) {
	workspaces := s.svc.Workspaces
	return nil, workspaces.Delete(r.Context(), r.PathValue("ws"))
}

func fieldErrors(list schemas.ErrorList) []schemas.FieldError {
	out := make([]schemas.FieldError, len(list))
	for i, fe := range list {
		out[i] = *fe
	}
	return out
}
