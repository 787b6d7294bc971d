package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// setQuota sets a workspace's quota. The quota workflow is started if the workspace has
// none yet; queued jobs that now fit are admitted at once.
func (s *Server) setQuota(r *http.Request) (any, error) {
	// decodeJSON names the field at fault and refuses trailing data, as every other
	// JSON body is read.
	var q api.Quota
	if err := decodeJSON(r, &q, s.opts.MaxBodySize, false); err != nil {
		return nil, err
	}
	return s.svc.Quotas.Set(r.Context(), r.PathValue("ws"), q)
}

// getQuota answers a workspace's quota and use.
func (s *Server) getQuota(r *http.Request) (any, error) {
	return s.svc.Quotas.Get(r.Context(), r.PathValue("ws"))
}

// setJobPriority changes a quota job's priority.
func (s *Server) setJobPriority(r *http.Request) (any, error) {
	return actOn(r, requiredBody, s.svc.Quotas.SetPriority)
}
