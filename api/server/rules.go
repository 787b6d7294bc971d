package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// redacted replaces secrets in rules the API returns.
const redacted = "********"

// applyRule creates or replaces a notification rule (YAML or JSON body).
func (s *Server) applyRule(r *http.Request) (any, error) {
	rule, err := readDoc(s, r, schemas.DecodeNotificationRule, nil)
	if err != nil {
		return nil, err
	}
	ws := rule.Metadata.Workspace
	if err := s.inWorkspace(r, ws, "notification rule "+ws+"/"+rule.Metadata.Name); err != nil {
		return nil, err
	}
	if _, err := s.svc.Rules.Apply(r.Context(), rule); err != nil {
		return nil, err
	}
	return redact(rule), nil
}

func (s *Server) getRule(r *http.Request) (any, error) {
	rule, err := s.svc.Rules.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return redact(rule), nil
}

func (s *Server) listRules(r *http.Request) (any, error) {
	rules, err := s.svc.Rules.List(r.Context(), r.PathValue("ws"))
	if err != nil {
		return nil, err
	}
	out := api.RuleList{Items: []schemas.NotificationRule{}}
	for _, rule := range rules {
		out.Items = append(out.Items, *redact(rule))
	}
	return out, nil
}

func (s *Server) deleteRule(r *http.Request) (any, error) {
	return nil, s.svc.Rules.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
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
