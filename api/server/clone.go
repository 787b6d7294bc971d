package server

import (
	"encoding/json"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// cloneJob starts a new job from an existing one's spec, with a new name and a JSON
// merge patch (RFC 7386) of overrides applied to the spec document. The result is
// decoded and validated like any submitted spec.
func (s *Server) cloneJob(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbWrite) {
		return
	}
	var req api.CloneRequest
	if !decodeJSON(w, r, &req, s.opts.MaxBodySize, false) {
		return
	}
	if req.Name == "" {
		writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid clone request",
			Details: []schemas.FieldError{{Field: "name", Detail: "is required: the new job's name"}}})
		return
	}
	src, ok := s.lookup(w, r)
	if !ok {
		return
	}
	doc, err := json.Marshal(src.Spec)
	if err != nil {
		s.internal(w, "clone", err)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		s.internal(w, "clone", err)
		return
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
	meta["workspace"] = r.PathValue("ws")
	body, err := json.Marshal(m)
	if err != nil {
		s.internal(w, "clone", err)
		return
	}
	job, err := schemas.DecodeTrainingJob(body)
	if err == nil {
		err = job.Validate().Err()
	}
	if err == nil {
		err = supported(job)
	}
	if err != nil {
		writeSpecError(w, err)
		return
	}
	s.start(w, r, job)
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
