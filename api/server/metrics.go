package server

import (
	"net/http"
	"time"

	"github.com/opendlc/opendlc/metrics"
)

// WithMetrics records every request in r (opendlc_api_requests_total and
// opendlc_api_request_duration_seconds, by route pattern and status code). Default none.
// The metrics are served by the process (app), not on the API's routes.
func WithMetrics(r *metrics.Registry) Option { return func(o *Options) { o.Metrics = r } }

// unmatchedRoute is the route label of requests no route matches, so that arbitrary
// paths never become label values.
const unmatchedRoute = "unmatched"

// instrument records each request's route pattern, status code and duration.
func (s *Server) instrument(next http.Handler, mux *routeMux) http.Handler {
	if s.opts.Metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := mux.Handler(r)
		if routeByPattern(pattern) == nil {
			pattern = unmatchedRoute
		}
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.status
		if code == 0 {
			code = http.StatusOK
		}
		s.opts.Metrics.APIRequest(pattern, code, time.Since(start))
	})
}
