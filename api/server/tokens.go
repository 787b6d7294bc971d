package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// smallBodyLimit bounds the JSON bodies of token, workspace, stop and clone requests.
const smallBodyLimit = 64 << 10

func (s *Server) whoami(r *http.Request) (any, error) {
	id, _ := IdentityFrom(r.Context())
	return id, nil
}

// store is the token store; without one the token and workspace routes answer 503 (the
// server then authenticates nobody anyway).
func (s *Server) store() (*auth.Store, error) {
	if s.opts.Auth == nil {
		return nil, unavailable("no token store configured")
	}
	return s.opts.Auth, nil
}

func (s *Server) createToken(r *http.Request) (any, error) {
	store, err := s.store()
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
	tok, err := store.CreateToken(r.Context(), req, id.Name)
	if err != nil {
		return nil, storeError("create token", err)
	}
	// Never the secret: only who made which token.
	s.opts.Logger.Info("token created", "token", tok.Name, "workspace", tok.Workspace, "role", tok.Role, "by", id.Name)
	return tok, nil
}

func (s *Server) listTokens(r *http.Request) (any, error) {
	store, err := s.store()
	if err != nil {
		return nil, err
	}
	toks, err := store.ListTokens(r.Context(), r.URL.Query().Get("workspace"))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	if toks == nil {
		toks = []api.Token{}
	}
	return api.TokenList{Items: toks}, nil
}

func (s *Server) revokeToken(r *http.Request) (any, error) {
	store, err := s.store()
	if err != nil {
		return nil, err
	}
	if err := store.RevokeToken(r.Context(), r.PathValue("name")); err != nil {
		return nil, storeError("revoke token", err)
	}
	return nil, nil
}

func (s *Server) createWorkspace(r *http.Request) (any, error) {
	store, err := s.store()
	if err != nil {
		return nil, err
	}
	var ws api.Workspace
	if err := decodeJSON(r, &ws, smallBodyLimit, false); err != nil {
		return nil, err
	}
	note(r, "", "workspace "+ws.Name)
	id, _ := IdentityFrom(r.Context())
	created, err := store.CreateWorkspace(r.Context(), api.Workspace{Name: ws.Name, Namespace: ws.Namespace, Description: ws.Description}, id.Name)
	if err != nil {
		return nil, storeError("create workspace", err)
	}
	return created, nil
}

func (s *Server) listWorkspaces(r *http.Request) (any, error) {
	store, err := s.store()
	if err != nil {
		return nil, err
	}
	id, _ := IdentityFrom(r.Context())
	list := api.WorkspaceList{Items: []api.Workspace{}}
	if id.Workspace == api.AllWorkspaces {
		all, err := store.ListWorkspaces(r.Context())
		if err != nil {
			return nil, fmt.Errorf("list workspaces: %w", err)
		}
		list.Items = append(list.Items, all...)
	} else {
		ws, err := store.GetWorkspace(r.Context(), id.Workspace)
		switch {
		case err == nil:
			list.Items = append(list.Items, ws)
		case !errors.Is(err, auth.ErrNotFound):
			return nil, fmt.Errorf("list workspaces: %w", err)
		}
	}
	return list, nil
}

func (s *Server) getWorkspace(r *http.Request) (any, error) {
	store, err := s.store()
	if err != nil {
		return nil, err
	}
	ws, err := store.GetWorkspace(r.Context(), r.PathValue("ws"))
	if err != nil {
		return nil, storeError("get workspace", err)
	}
	return ws, nil
}

// storeError is the answer to an error of the token store.
func storeError(what string, err error) error {
	var list schemas.ErrorList
	switch {
	case errors.As(err, &list):
		return &httpError{http.StatusUnprocessableEntity, api.Error{Code: api.CodeInvalidArgument,
			Message: fmt.Sprintf("%s: %d problem(s)", what, len(list)), Details: fieldErrors(list)}}
	case errors.Is(err, auth.ErrExists):
		return &httpError{http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
			Message: strings.TrimPrefix(err.Error(), auth.ErrExists.Error()+": ") + " already exists"}}
	case errors.Is(err, auth.ErrNotFound):
		return notFound(strings.TrimPrefix(err.Error(), auth.ErrNotFound.Error()+": ") + " not found")
	}
	return fmt.Errorf("%s: %w", what, err)
}

func fieldErrors(list schemas.ErrorList) []schemas.FieldError {
	out := make([]schemas.FieldError, len(list))
	for i, fe := range list {
		out[i] = *fe
	}
	return out
}
