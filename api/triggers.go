package api

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

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

// TriggerStatus is what a trigger's gate (docs/triggers.md, "Controls") says of it. A
// trigger without controls, or one whose gate has not started (no event yet), has
// Gate false and nothing else.
type TriggerStatus struct {
	// Gate says whether the trigger has a gate.
	Gate bool `json:"gate"`
	// Events, Started, Refused and Dropped count the gate's events (repeats left out),
	// the runs it started, the batches whose start was refused (the trigger deleted, an
	// invalid action) and the batches it dropped (overflow drop).
	Events  int `json:"events"`
	Started int `json:"started"`
	Refused int `json:"refused"`
	Dropped int `json:"dropped"`
	// Window is how many events the open debounce window holds, and WindowEnd when it
	// closes.
	Window    int        `json:"window"`
	WindowEnd *time.Time `json:"windowEnd,omitempty"`
	// Queued is how many batches wait for the limits; Running names the runs counted by
	// maxConcurrentRuns.
	Queued  int      `json:"queued"`
	Running []string `json:"running,omitempty"`
	// RecentDrops are the latest dropped batches (at most 20).
	RecentDrops []TriggerDrop `json:"recentDrops,omitempty"`
}

// TriggerDrop is a batch a trigger's gate dropped.
type TriggerDrop struct {
	// FirstEvent is the id of the batch's first event, Events how many it held.
	FirstEvent string    `json:"firstEvent"`
	Events     int       `json:"events"`
	Time       time.Time `json:"time"`
	Reason     string    `json:"reason"`
}
