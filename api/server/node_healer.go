package server

import "net/http"

// getNodeHealer answers the node self-healing workflow's state (GET /v1/node-healer):
// its counters and its latest round's re-checks, with running false when the workflow
// is not running (no worker's backend checks nodes). Only a cluster administrator (the
// admin role, which the router checked, with a token of every workspace) may read it.
// It is not under /v1/nodes/, where a node of any name is reachable.
func (s *Server) getNodeHealer(r *http.Request) (any, error) {
	if err := nodeAccess(r, ""); err != nil {
		return nil, err
	}
	return s.svc.Nodes.HealerStatus(r.Context())
}
