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

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbRead) {
		return
	}
	id, _ := IdentityFrom(r.Context())
	writeJSON(w, http.StatusOK, id)
}

// store answers 503 when the server has no token store (it then authenticates
// nobody anyway).
func (s *Server) store(w http.ResponseWriter) (*auth.Store, bool) {
	if s.opts.Auth == nil {
		writeError(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: "no token store configured"})
		return nil, false
	}
	return s.opts.Auth, true
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbAdmin) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	var req api.TokenRequest
	if !decodeJSON(w, r, &req, smallBodyLimit, false) {
		return
	}
	ws := req.Workspace
	if ws == api.AllWorkspaces {
		ws = ""
	}
	note(r, ws, "token "+req.Name)
	id, _ := IdentityFrom(r.Context())
	tok, err := store.CreateToken(r.Context(), req, id.Name)
	if err != nil {
		s.storeError(w, "create token", err)
		return
	}
	// Never the secret: only who made which token.
	s.opts.Logger.Info("token created", "token", tok.Name, "workspace", tok.Workspace, "role", tok.Role, "by", id.Name)
	writeJSON(w, http.StatusCreated, tok)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbAdmin) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	toks, err := store.ListTokens(r.Context(), r.URL.Query().Get("workspace"))
	if err != nil {
		s.internal(w, "list tokens", err)
		return
	}
	if toks == nil {
		toks = []api.Token{}
	}
	writeJSON(w, http.StatusOK, api.TokenList{Items: toks})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbAdmin) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	if err := store.RevokeToken(r.Context(), r.PathValue("name")); err != nil {
		s.storeError(w, "revoke token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbAdmin) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	var ws api.Workspace
	if !decodeJSON(w, r, &ws, smallBodyLimit, false) {
		return
	}
	note(r, "", "workspace "+ws.Name)
	id, _ := IdentityFrom(r.Context())
	created, err := store.CreateWorkspace(r.Context(), api.Workspace{Name: ws.Name, Namespace: ws.Namespace, Description: ws.Description}, id.Name)
	if err != nil {
		s.storeError(w, "create workspace", err)
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, "", auth.VerbRead) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	id, _ := IdentityFrom(r.Context())
	list := api.WorkspaceList{Items: []api.Workspace{}}
	if id.Workspace == api.AllWorkspaces {
		all, err := store.ListWorkspaces(r.Context())
		if err != nil {
			s.internal(w, "list workspaces", err)
			return
		}
		list.Items = append(list.Items, all...)
	} else {
		ws, err := store.GetWorkspace(r.Context(), id.Workspace)
		switch {
		case err == nil:
			list.Items = append(list.Items, ws)
		case !errors.Is(err, auth.ErrNotFound):
			s.internal(w, "list workspaces", err)
			return
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("ws")
	if !s.authorize(w, r, name, auth.VerbRead) {
		return
	}
	store, ok := s.store(w)
	if !ok {
		return
	}
	ws, err := store.GetWorkspace(r.Context(), name)
	if err != nil {
		s.storeError(w, "get workspace", err)
		return
	}
	writeJSON(w, http.StatusOK, ws)
}

// storeError answers an error of the token store.
func (s *Server) storeError(w http.ResponseWriter, what string, err error) {
	var list schemas.ErrorList
	switch {
	case errors.As(err, &list):
		writeError(w, http.StatusUnprocessableEntity, api.Error{Code: api.CodeInvalidArgument,
			Message: fmt.Sprintf("%s: %d problem(s)", what, len(list)), Details: fieldErrors(list)})
	case errors.Is(err, auth.ErrExists):
		writeError(w, http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
			Message: strings.TrimPrefix(err.Error(), auth.ErrExists.Error()+": ") + " already exists"})
	case errors.Is(err, auth.ErrNotFound):
		writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
			Message: strings.TrimPrefix(err.Error(), auth.ErrNotFound.Error()+": ") + " not found"})
	default:
		s.internal(w, what, err)
	}
}

func fieldErrors(list schemas.ErrorList) []schemas.FieldError {
	out := make([]schemas.FieldError, len(list))
	for i, fe := range list {
		out[i] = *fe
	}
	return out
}
