package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// smallBodyLimit bounds the JSON bodies of token, workspace, stop and clone requests.
const smallBodyLimit = 64 << 10

func (s *Server) whoami(r *http.Request) (any, error) {
	id, _ := IdentityFrom(r.Context())
	return id, nil
}

// noStore is the answer of the token and workspace routes without a token store: 503
// (the server then authenticates nobody anyway).
func noStore() error { return unavailable("no token store configured") }

func (s *Server) tokens() (*service.Tokens, error) {
	if s.svc.Tokens == nil {
		return nil, noStore()
	}
	return s.svc.Tokens, nil
}

func (s *Server) workspaces() (*service.Workspaces, error) {
	if s.svc.Workspaces == nil {
		return nil, noStore()
	}
	return s.svc.Workspaces, nil
}

func (s *Server) createToken(r *http.Request) (any, error) {
	tokens, err := s.tokens()
	if err != nil {
		return nil, err
	}
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
	tokens, err := s.tokens()
	if err != nil {
		return nil, err
	}
	id, _ := IdentityFrom(r.Context())
	return tokens.List(r.Context(), r.URL.Query().Get("workspace"), id)
}

func (s *Server) revokeToken(r *http.Request) (any, error) {
	tokens, err := s.tokens()
	if err != nil {
		return nil, err
	}
	id, _ := IdentityFrom(r.Context())
	return nil, tokens.Revoke(r.Context(), r.PathValue("name"), id)
}

func (s *Server) createWorkspace(r *http.Request) (any, error) {
	workspaces, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	var ws api.Workspace
	if err := decodeJSON(r, &ws, smallBodyLimit, false); err != nil {
		return nil, err
	}
	note(r, "", "workspace "+ws.Name)
	id, _ := IdentityFrom(r.Context())
	return workspaces.Create(r.Context(), ws, id.Name)
}

func (s *Server) listWorkspaces(r *http.Request) (any, error) {
	workspaces, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	id, _ := IdentityFrom(r.Context())
	return workspaces.List(r.Context(), id)
}

func (s *Server) getWorkspace(r *http.Request) (any, error) {
	workspaces, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	return workspaces.Get(r.Context(), r.PathValue("ws"))
}

// deleteWorkspace deletes a workspace that holds nothing any more and revokes its
// tokens; one that still holds jobs, experiments, pipelines or schedules is 409.
func (s *Server) deleteWorkspace(r *http.Request) (any, error) {
	workspaces, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	return nil, workspaces.Delete(r.Context(), r.PathValue("ws"))
}

func fieldErrors(list schemas.ErrorList) []schemas.FieldError {
	out := make([]schemas.FieldError, len(list))
	for i, fe := range list {
		out[i] = *fe
	}
	return out
}
