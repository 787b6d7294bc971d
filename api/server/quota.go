package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// setQuota sets a workspace's quota. The quota workflow is started if the workspace has
// none yet; queued jobs that now fit are admitted at once.
func (s *Server) setQuota(r *http.Request) (any, error) {
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	var q api.Quota
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return nil, &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid quota: " + err.Error()}}
	}
	return s.svc.Quotas.Set(r.Context(), r.PathValue("ws"), q)
}

// getQuota answers a workspace's quota and use.
func (s *Server) getQuota(r *http.Request) (any, error) {
	return s.svc.Quotas.Get(r.Context(), r.PathValue("ws"))
}
