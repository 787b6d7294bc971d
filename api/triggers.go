package api

import "github.com/opendlc/opendlc/schemas"

// TriggerList is a workspace's triggers.
type TriggerList struct {
	Items []schemas.Trigger `json:"items"`
}

// WebhookAccepted answers a delivery to a trigger's webhook.
type WebhookAccepted struct {
	// Delivery is the request's delivery id.
	Delivery string `json:"delivery"`
	// EventID is the id of the event the request became.
	EventID string `json:"eventId"`
	// Run is the name of what the trigger starts for the event, if the event passes
	// the trigger's filter.
	Run string `json:"run"`
}
