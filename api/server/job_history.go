package server

import (
	"net/http"
	"regexp"

	"github.com/opendlc/opendlc/api"
)

// jobView answers the job a request names: by name (a deleted job is not found), one
// run by ?uid=, or the name's newest run even if deleted with ?includeDeleted=true.
func (s *Server) jobView(r *http.Request) (api.Job, error) {
	ws, name, q := r.PathValue("ws"), r.PathValue("name"), r.URL.Query()
	if uid := q.Get("uid"); uid != "" {
		return s.svc.Jobs.GetRun(r.Context(), ws, name, uid)
	}
	if isTrue(q.Get("includeDeleted")) {
		return s.svc.Jobs.GetDeleted(r.Context(), ws, name)
	}
	return s.svc.Jobs.Get(r.Context(), ws, name)
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// deletedJobParams select a deleted job or one run of a job (jobView).
var deletedJobParams = []param{
	{name: "uid", typ: "string", desc: "this run of the job (its uid), deleted or not"},
	{name: "includeDeleted", typ: "boolean", desc: "the name's newest run even if it was deleted"},
}

// uidRE is a run id (a UUID as Temporal writes it).
var uidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
