package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// cloneJob starts a new job from an existing one's spec, with a new name and a JSON
// merge patch (RFC 7386) of overrides applied to the spec document. The result is
// decoded and validated like any submitted spec.
func (s *Server) cloneJob(r *http.Request) (any, error) {
	var req api.CloneRequest
	if err := decodeJSON(r, &req, s.opts.MaxBodySize, false); err != nil {
		return nil, err
	}
	if req.Name == "" {
		return nil, badRequest("invalid clone request", "name", "is required: the new job's name")
	}
	ws := r.PathValue("ws")
	src, err := s.svc.Jobs.Get(r.Context(), ws, r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(src.Spec)
	if err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	if req.Overrides != nil {
		m = mergePatch(m, req.Overrides).(map[string]any)
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	meta["name"] = req.Name
	meta["workspace"] = ws
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	job, err := decodeSpec(body)
	if err != nil {
		return nil, err
	}
	return s.svc.Jobs.Start(r.Context(), job)
}

// mergePatch applies a JSON merge patch (RFC 7386): objects merge recursively, null
// deletes a member, anything else replaces.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}
