package server

import "net/http"

// scaleJob sets a running elastic job's replica count (service.Jobs.Scale).
func (s *Server) scaleJob(r *http.Request) (any, error) {
	return actOn(r, requiredBody, s.svc.Jobs.Scale)
}
