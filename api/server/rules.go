package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// redacted replaces secrets in rules the API returns.
const redacted = "********"

// applyRule creates or replaces a notification rule (YAML or JSON body).
func (s *Server) applyRule(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	rule, err := schemas.DecodeNotificationRule(body)
	if err == nil {
		err = rule.Validate().Err()
	}
	if err != nil {
		writeSpecError(w, err)
		return
	}
	note(r, rule.Metadata.Workspace, "notification rule "+rule.Metadata.Workspace+"/"+rule.Metadata.Name)
	if !s.authorize(w, r, rule.Metadata.Workspace, auth.VerbWrite) {
		return
	}
	if _, err := s.opts.Rules.Put(r.Context(), rule); err != nil {
		var list schemas.ErrorList
		if errors.As(err, &list) {
			writeSpecError(w, err)
			return
		}
		s.internal(w, "store rule", err)
		return
	}
	writeJSON(w, http.StatusOK, redact(rule))
}

func (s *Server) getRule(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbRead) {
		return
	}
	rule, err := s.opts.Rules.Get(r.Context(), ws, name)
	if errors.Is(err, notify.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
			Message: fmt.Sprintf("notification rule %s not found in workspace %s", name, ws)})
		return
	}
	if err != nil {
		s.internal(w, "get rule", err)
		return
	}
	writeJSON(w, http.StatusOK, redact(rule))
}

func (s *Server) listRules(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r, r.PathValue("ws"), auth.VerbRead) {
		return
	}
	rules, err := s.opts.Rules.List(r.Context(), r.PathValue("ws"))
	if err != nil {
		s.internal(w, "list rules", err)
		return
	}
	out := api.RuleList{Items: []schemas.NotificationRule{}}
	for _, rule := range rules {
		out.Items = append(out.Items, *redact(rule))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if !s.authorize(w, r, ws, auth.VerbWrite) {
		return
	}
	err := s.opts.Rules.Delete(r.Context(), ws, name)
	if errors.Is(err, notify.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound,
			Message: fmt.Sprintf("notification rule %s not found in workspace %s", name, ws)})
		return
	}
	if err != nil {
		s.internal(w, "delete rule", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// redact hides a rule's webhook secret and header values: they are credentials.
func redact(r *schemas.NotificationRule) *schemas.NotificationRule {
	c := *r
	if r.Spec.Webhook != nil {
		wh := *r.Spec.Webhook
		if wh.Secret != "" {
			wh.Secret = redacted
		}
		if len(wh.Headers) > 0 {
			h := make(map[string]string, len(wh.Headers))
			for k := range wh.Headers {
				h[k] = redacted
			}
			wh.Headers = h
		}
		c.Spec.Webhook = &wh
	}
	return &c
}
