package triggers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// The headers of a request to a trigger's webhook (docs/triggers.md, "Webhooks").
const (
	// HeaderSignature is "sha256=" and the lowercase hex HMAC-SHA256, keyed with the
	// trigger's webhook secret, of WebhookSignedPayload: GitHub's header name and form,
	// over the timestamp, the delivery id and the body.
	HeaderSignature = "X-Hub-Signature-256"
	// HeaderTimestamp is when the request was signed, in Unix seconds; it must be
	// within WebhookWindow of the server's clock.
	HeaderTimestamp = "X-OpenDLC-Timestamp"
	// HeaderDelivery identifies the delivery: 1 to 128 letters, digits, '.', '_', ':'
	// and '-'. A delivery id accepted once is refused again (a replay), and names the
	// event, so that what the trigger starts for it starts once.
	HeaderDelivery = "X-OpenDLC-Delivery"
)

// WebhookWindow is how far a request's timestamp may be from the server's clock, in
// either direction.
const WebhookWindow = 5 * time.Minute

// WebhookEventType is the CloudEvents type of the event a webhook request becomes.
const WebhookEventType = "opendlc.trigger.webhook"

var deliveryRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// WebhookError is a refused webhook request: Status is the HTTP status to answer
// (400 or 401), Header the header at fault, if any.
type WebhookError struct {
	Status int
	Header string
	Msg    string
}

func (e *WebhookError) Error() string { return e.Msg }

// WebhookSignedPayload is what a webhook request's signature covers: the timestamp,
// the delivery id and the raw body, joined by '.'. The timestamp and the delivery id
// are signed so that neither can be changed to replay a request.
func WebhookSignedPayload(timestamp, delivery string, body []byte) []byte {
	out := make([]byte, 0, len(timestamp)+len(delivery)+2+len(body))
	out = append(out, timestamp...)
	out = append(out, '.')
	out = append(out, delivery...)
	out = append(out, '.')
	return append(out, body...)
}

// SignWebhook returns the HeaderSignature value of a request: what a sender computes.
func SignWebhook(secret []byte, timestamp, delivery string, body []byte) string {
	return notify.Sign(secret, WebhookSignedPayload(timestamp, delivery, body))
}

// VerifyWebhook checks a webhook request's headers and signature against secret at
// time now, and returns its delivery id. The signature is compared in constant time.
// It does not check that the delivery id is new: the publish to DLC_INBOUND does
// (PublishWebhook's caller).
func VerifyWebhook(secret []byte, h http.Header, body []byte, now time.Time) (string, error) {
	delivery := h.Get(HeaderDelivery)
	if !deliveryRE.MatchString(delivery) {
		return "", &WebhookError{http.StatusBadRequest, HeaderDelivery, HeaderDelivery + " must be 1 to 128 letters, digits, '.', '_', ':' and '-'"}
	}
	ts := h.Get(HeaderTimestamp)
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", &WebhookError{http.StatusBadRequest, HeaderTimestamp, HeaderTimestamp + " must be the time of signing in Unix seconds"}
	}
	if d := now.Sub(time.Unix(secs, 0)); d > WebhookWindow || d < -WebhookWindow {
		return "", &WebhookError{http.StatusUnauthorized, HeaderTimestamp,
			fmt.Sprintf("%s is %s from the server's clock, more than %s: sign each request when it is sent", HeaderTimestamp, d.Round(time.Second), WebhookWindow)}
	}
	if h.Get(HeaderSignature) == "" {
		return "", &WebhookError{http.StatusUnauthorized, HeaderSignature, HeaderSignature + " is required: sha256=<hex HMAC-SHA256 of timestamp.delivery.body>"}
	}
	if !notify.VerifySignature(secret, WebhookSignedPayload(ts, delivery, body), h.Get(HeaderSignature)) {
		return "", &WebhookError{http.StatusUnauthorized, HeaderSignature, HeaderSignature + " does not match: want sha256=<hex HMAC-SHA256 of timestamp.delivery.body> keyed with the trigger's webhook secret"}
	}
	return delivery, nil
}

// WebhookSource is the CloudEvents source of a trigger's webhook events.
func WebhookSource(workspace, trigger string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/triggers/%s/webhook", workspace, trigger)
}

// WebhookEvent is the inbound event a verified webhook request becomes, published on
// t.ListenSubject() with the message id it returns: a CloudEvent whose id is the
// delivery id, whose source is WebhookSource and whose data is the body, which must be
// JSON. Its event id (ParseEvent) is "<source> <delivery>".
func WebhookEvent(t *schemas.Trigger, delivery string, body []byte, now time.Time) (data []byte, msgID string, err error) {
	if !json.Valid(body) {
		return nil, "", &WebhookError{Status: http.StatusBadRequest, Msg: "the body must be a JSON document"}
	}
	ws, name := t.Metadata.Workspace, t.Metadata.Name
	data, err = json.Marshal(struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Time            time.Time       `json:"time"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
	}{"1.0", delivery, WebhookSource(ws, name), WebhookEventType, now.UTC(), "application/json", body})
	if err != nil {
		return nil, "", errors.Join(errors.New("triggers: webhook event"), err)
	}
	return data, ws + "/" + name + "/" + delivery, nil
}
