package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/service"
)

// workspaceAudit answers a workspace's latest audit records, newest first
// (GET /v1/workspaces/{ws}/audit). The router has checked that the token may manage
// the workspace's tokens (auth.VerbTokens in it: a workspace admin of it, or an
// admin): who may see the tokens may see what was done with them. Reading is a GET,
// so it is not itself audited.
func (s *Server) workspaceAudit(r *http.Request) (any, error) {
	q := r.URL.Query()
	window := service.AuditWindow
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > service.AuditWindow {
			return nil, badRequest(fmt.Sprintf("invalid query parameter since=%s: audit records are read from the last %s at most", quoteShort(v), service.AuditWindow),
				"since", fmt.Sprintf("must be a positive duration of at most %s, such as 24h", service.AuditWindow))
		}
		window = d
	}
	limit := service.AuditRecords
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > service.AuditRecords {
			return nil, badRequest("invalid query parameter limit="+quoteShort(v),
				"limit", fmt.Sprintf("must be an integer between 1 and %d", service.AuditRecords))
		}
		limit = n
	}
	return s.svc.Audit.Latest(r.Context(), r.PathValue("ws"), window, limit)
}
