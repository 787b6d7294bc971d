package server

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
)

// triggerRoutes are the Trigger operations (registered in kinds.go); without a trigger
// store they answer 503 (triggersFeature).
var triggerRoutes = []route{
	{method: "POST", path: "/v1/triggers", handler: (*Server).applyTrigger, verb: auth.VerbWrite, ws: wsBody, feature: triggersFeature, object: "trigger",
		id: "applyTrigger", tag: "triggers", summary: "Create or replace a trigger in the trigger's workspace",
		request:   &payload{v: schemas.Trigger{}, media: specMedia},
		responses: []reply{{200, "the trigger, its webhook secret redacted", redactedBody(schemas.Trigger{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers", handler: (*Server).listTriggers, verb: auth.VerbRead, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "listTriggers", tag: "triggers", summary: "A workspace's triggers, webhook secrets redacted",
		responses: []reply{{200, "the triggers", redactedBody(api.TriggerList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).getTrigger, verb: auth.VerbRead, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "getTrigger", tag: "triggers", summary: "A trigger, its webhook secret redacted",
		responses: []reply{{200, "the trigger", redactedBody(schemas.Trigger{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/triggers/{name}", handler: (*Server).deleteTrigger, verb: auth.VerbWrite, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "deleteTrigger", tag: "triggers", summary: "Delete a trigger; what it started keeps running",
		responses: []reply{{204, "deleted", nil}}},
	{method: "GET", path: "/v1/workspaces/{ws}/triggers/{name}/status", handler: (*Server).triggerStatus, verb: auth.VerbRead, ws: wsPath, feature: triggersFeature, object: "trigger",
		id: "getTriggerStatus", tag: "triggers", summary: "What a trigger's gate holds: events, runs started, refused and dropped, the debounce window, the queue, the running runs",
		responses: []reply{{200, "the gate's state; gate false for a trigger without controls or before its first event", jsonBody(api.TriggerStatus{})}}},
	// The webhook needs no token: the request is authenticated by its signature with
	// the trigger's webhook secret (triggers.VerifyWebhook).
	{method: "POST", path: "/v1/workspaces/{ws}/triggers/{name}/webhook", handler: (*Server).triggerWebhook, public: true, feature: triggersFeature, object: "trigger",
		id: "triggerWebhook", tag: "triggers",
		summary: "Deliver an event to a trigger's webhook; needs no token, but the headers " + triggers.HeaderSignature + " (sha256=<hex HMAC-SHA256 of timestamp.delivery.body>), " +
			triggers.HeaderTimestamp + " (Unix seconds, within 5 minutes) and " + triggers.HeaderDelivery + " (a new delivery id)",
		request:   &payload{v: map[string]any{}, media: jsonMedia},
		responses: []reply{{202, "the event is accepted: the trigger starts its action for it once", jsonBody(api.WebhookAccepted{})}}},
}

func (s *Server) triggerStatus(r *http.Request) (any, error) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	if _, err := s.svc.Triggers.Get(r.Context(), ws, name); err != nil {
		return nil, err
	}
	return s.svc.TriggerStatus(r.Context(), ws, name)
}

// maxWebhookBody bounds a webhook request's body.
const maxWebhookBody = 256 << 10

// WithWebhookSecrets resolves the secretRef of triggers' webhooks. Default none: a
// webhook whose trigger names a secretRef answers 503.
func WithWebhookSecrets(src notify.SecretSource) Option {
	return func(o *Options) { o.WebhookSecrets = src }
}

// triggerWebhook turns a signed request into an event of the trigger's inbound subject
// (DLC_INBOUND), with the delivery id as message id: the dispatcher starts the
// trigger's action for it exactly once, and a delivery id accepted before is refused.
func (s *Server) triggerWebhook(r *http.Request) (any, error) {
	ws, name := r.PathValue("ws"), r.PathValue("name")
	limit := min(s.opts.MaxBodySize, maxWebhookBody)
	body, err := io.ReadAll(http.MaxBytesReader(writerOf(r), r.Body, limit))
	if err != nil {
		return nil, bodyReadError(err, limit)
	}
	t, err := s.svc.Triggers.Get(r.Context(), ws, name)
	if err != nil {
		return nil, err
	}
	wh := t.Spec.Webhook
	if wh == nil {
		return nil, notFound("trigger " + ws + "/" + name + " has no webhook (spec.webhook)")
	}
	secret := []byte(wh.Secret)
	if wh.SecretRef != nil {
		if s.opts.WebhookSecrets == nil {
			return nil, unavailable("trigger " + ws + "/" + name + ": spec.webhook.secretRef cannot be resolved: this server has no secret source")
		}
		if secret, err = s.opts.WebhookSecrets.Secret(r.Context(), ws, *wh.SecretRef); err != nil {
			s.opts.Logger.Warn("webhook secret not resolved", "workspace", ws, "trigger", name, "error", err)
			return nil, unavailable("trigger " + ws + "/" + name + ": spec.webhook.secretRef cannot be resolved")
		}
	}
	now := time.Now()
	delivery, err := triggers.VerifyWebhook(secret, r.Header, body, now)
	if err == nil {
		var data []byte
		var msgID string
		if data, msgID, err = triggers.WebhookEvent(t, delivery, body, now); err == nil {
			return s.publishWebhook(r, t, delivery, data, msgID)
		}
	}
	if we, ok := errors.AsType[*triggers.WebhookError](err); ok {
		code := api.CodeInvalidArgument
		if we.Status == http.StatusUnauthorized {
			code = api.CodeUnauthenticated
		}
		e := api.Error{Code: code, Message: we.Msg}
		if we.Header != "" {
			e.Details = []schemas.FieldError{{Field: "header " + we.Header, Detail: we.Msg}}
		}
		return nil, &httpError{we.Status, e}
	}
	return nil, err
}

// publishWebhook publishes a verified webhook event; a delivery id stored before is
// a replay, refused with 409.
func (s *Server) publishWebhook(r *http.Request, t *schemas.Trigger, delivery string, data []byte, msgID string) (any, error) {
	if s.ev == nil {
		return nil, unavailable("this server has no JetStream connection: webhooks are not served")
	}
	ack, err := s.ev.JetStream().Publish(r.Context(), t.ListenSubject(), data, jetstream.WithMsgID(msgID))
	if err != nil {
		s.opts.Logger.Error("webhook event not published", "workspace", t.Metadata.Workspace, "trigger", t.Metadata.Name, "error", err)
		return nil, unavailable("the event cannot be stored now; send it again with the same " + triggers.HeaderDelivery)
	}
	if ack.Duplicate {
		return nil, &httpError{http.StatusConflict, api.Error{Code: api.CodeAlreadyExists,
			Message: "delivery " + delivery + " was accepted before: a repeated delivery id is refused",
			Details: []schemas.FieldError{{Field: "header " + triggers.HeaderDelivery, Detail: "already accepted"}}}}
	}
	eventID := triggers.WebhookSource(t.Metadata.Workspace, t.Metadata.Name) + " " + delivery
	return api.WebhookAccepted{Delivery: delivery, EventID: eventID, Run: schemas.TriggerRunName(t.Metadata.Name, eventID)}, nil
}

// redactTrigger hides a trigger's webhook secret: it lets anyone start the trigger.
func redactTrigger(t *schemas.Trigger) *schemas.Trigger {
	if t.Spec.Webhook == nil || t.Spec.Webhook.Secret == "" {
		return t
	}
	c := *t
	wh := *t.Spec.Webhook
	wh.Secret = redacted
	c.Spec.Webhook = &wh
	return &c
}

func (s *Server) applyTrigger(r *http.Request) (any, error) {
	t, err := readDoc(s, r, schemas.DecodeTrigger)
	if err != nil {
		return nil, err
	}
	if err := s.inWorkspace(r, t.Metadata.Workspace, "trigger "+t.Metadata.Workspace+"/"+t.Metadata.Name); err != nil {
		return nil, err
	}
	stored, err := s.svc.Triggers.Apply(r.Context(), t)
	if err != nil {
		return nil, err
	}
	return redactTrigger(stored), nil
}

func (s *Server) getTrigger(r *http.Request) (any, error) {
	t, err := s.svc.Triggers.Get(r.Context(), r.PathValue("ws"), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return redactTrigger(t), nil
}

func (s *Server) listTriggers(r *http.Request) (any, error) {
	list, err := s.svc.Triggers.List(r.Context(), r.PathValue("ws"))
	if err != nil {
		return nil, err
	}
	out := api.TriggerList{Items: []schemas.Trigger{}}
	for _, t := range list {
		out.Items = append(out.Items, *redactTrigger(t))
	}
	return out, nil
}

func (s *Server) deleteTrigger(r *http.Request) (any, error) {
	return nil, s.svc.Triggers.Delete(r.Context(), r.PathValue("ws"), r.PathValue("name"))
}
