package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// listKind lists one page of a workspace's workflows of kind from Temporal visibility:
// the page size from `limit` (1 to 1000, default 100) and `pageToken`; with filters,
// also `phase` and every `label` (key=value); extra, when set, is one more clause. It
// answers a bad request or a failed list itself and returns false.
func (s *Server) listKind(w http.ResponseWriter, r *http.Request, ws string, kind schemas.Kind, filters bool, extra string) (*workflowservice.ListWorkflowExecutionsResponse, bool) {
	q := r.URL.Query()
	pageSize := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid limit",
				Details: []schemas.FieldError{{Field: "limit", Detail: "must be an integer between 1 and 1000"}}})
			return nil, false
		}
		pageSize = n
	}
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.SearchAttrKind, string(kind), workflows.SearchAttrWorkspace, ws)
	if extra != "" {
		query += " AND " + extra
	}
	if filters {
		if phase := q.Get("phase"); phase != "" {
			query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrPhase, phase)
		}
		for _, l := range q["label"] {
			if !strings.Contains(l, "=") {
				writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid label filter",
					Details: []schemas.FieldError{{Field: "label", Detail: "must be key=value"}}})
				return nil, false
			}
			query += fmt.Sprintf(" AND %s = %q", workflows.SearchAttrLabels, l)
		}
	}
	resp, err := s.tc.ListWorkflow(r.Context(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace:     s.opts.Namespace,
		PageSize:      int32(pageSize),
		NextPageToken: []byte(q.Get("pageToken")),
		Query:         query,
	})
	if err != nil {
		s.internal(w, "list "+strings.ToLower(string(kind))+"s", err)
		return nil, false
	}
	return resp, true
}
