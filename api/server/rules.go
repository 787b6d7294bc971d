package server

import (
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// ruleRoutes are the NotificationRule operations (registered in kinds.go), served
// with a rule store (rulesFeature).
var ruleRoutes = []route{
	{method: "POST", path: "/v1/notificationrules", handler: (*Server).applyRule, verb: auth.VerbWrite, ws: wsBodyLate, feature: rulesFeature, object: "notification rule",
		id: "applyRule", tag: "notifications", summary: "Create or replace a notification rule in the rule's workspace",
		request:   &payload{v: schemas.NotificationRule{}, media: specMedia},
		responses: []reply{{200, "the rule, secrets redacted", redactedBody(schemas.NotificationRule{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/notificationrules", handler: (*Server).listRules, verb: auth.VerbRead, ws: wsPath, feature: rulesFeature, object: "notification rule",
		id: "listRules", tag: "notifications", summary: "A workspace's notification rules, secrets redacted",
		responses: []reply{{200, "the rules", redactedBody(api.RuleList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/notificationrules/{name}", handler: (*Server).getRule, verb: auth.VerbRead, ws: wsPath, feature: rulesFeature, object: "notification rule",
		id: "getRule", tag: "notifications", summary: "A notification rule, secrets redacted",
		responses: []reply{{200, "the rule", redactedBody(schemas.NotificationRule{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/notificationrules/{name}", handler: (*Server).deleteRule, verb: auth.VerbWrite, ws: wsPath, feature: rulesFeature, object: "notification rule",
		id: "deleteRule", tag: "notifications", summary: "Delete a notification rule",
		responses: []reply{{204, "deleted", nil}}},
	{method: "POST", path: "/v1/workspaces/{ws}/notificationrules/{name}/redrive", handler: (*Server).redriveRule, verb: auth.VerbWrite, ws: wsPath, feature: redriveFeature, object: "notification rule",
		id: "redriveRule", tag: "notifications", summary: "Send a rule's dead letters again, each once, through its current target",
		request:   &payload{v: api.RedriveRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the dead letters queued", jsonBody(api.RedriveResult{})}}},
}

// redriveFeature is served when the service redrives dead letters.
var redriveFeature = &feature{on: func(s *Server) bool { return s.svc.Redrives != nil }}

// redriveRule queues a rule's dead letters for delivery again (service.Redrives).
func (s *Server) redriveRule(r *http.Request) (any, error) {
	return actOn(r, optionalBody, s.svc.Redrives.Redrive)
}

// redacted replaces secrets in rules the API returns.
const redacted = "********"

// applyRule creates or replaces a notification rule (YAML or JSON body).
func (s *Server) applyRule(r *http.Request) (any, error) {
	rule, err := readDoc(s, r, schemas.DecodeNotificationRule)
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

// redact hides a rule's webhook secret, bot secret and header values: they are
// credentials.
func redact(r *schemas.NotificationRule) *schemas.NotificationRule {
	c := *r
	if r.Spec.Webhook != nil {
		wh := *r.Spec.Webhook
		if wh.Secret != "" {
			wh.Secret = redacted
		}
		if wh.BotSecret != "" {
			wh.BotSecret = redacted
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
