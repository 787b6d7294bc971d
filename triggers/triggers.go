// Package triggers starts work when events arrive. A Trigger (schemas) names an inbound
// NATS subject of its workspace, a filter on the event's fields, and an action: a
// pipeline run or a job, with parameters taken from the event. Triggers live in the
// JetStream key-value bucket DLC_TRIGGERS, managed through Store, like notification
// rules: they are configuration, while Temporal stays the only record of what ran.
//
// # Inbound events
//
// The DLC_INBOUND stream keeps every inbound subject: dlc.<workspace>.trigger.<name>,
// where programs publish (a CloudEvent, or any JSON), and dlc.<workspace>.s3.<name>,
// where an S3 server publishes bucket notifications (the dev stack's versitygw
// publishes to dlc.<workspace>.s3.events; see docs/triggers.md for MinIO and AWS). One
// Dispatcher reads it through the durable consumer "dlc-triggers", so events that
// arrive while no dispatcher runs are handled when one starts. A trigger may instead
// listen to OpenDLC's own status events of its workspace (own.go: a second durable
// consumer, on DLC_EVENTS), or have an HTTP webhook whose signed requests the API
// server publishes to the trigger's subject (webhook.go).
//
// # Controls
//
// A trigger with a debounce, a rate limit or a concurrency bound hands its events to
// its gate, a Temporal workflow (workflows.TriggerGateWorkflow) that keeps the state
// the controls need and starts the runs through activities every dispatcher serves
// (gate.go).
//
// # Exactly one start per event
//
// Each event has an id: a CloudEvent's source and id, or an S3 record's bucket, key,
// eTag and sequencer. What a trigger starts for an event is named
// schemas.TriggerRunName(trigger, id), and its Temporal workflow id derives from that
// name with a reuse policy that refuses any id used before. An event delivered twice
// (published twice, redelivered after a crash, or read again by a restarted
// dispatcher) therefore starts its action once: the second start is answered
// "already started", which the dispatcher counts as done. An event is acknowledged
// once every trigger that matches it has started its action; a start that fails for a
// transient reason (Temporal unreachable) leaves the event unacknowledged and it is
// delivered again after a backoff.
package triggers

import (
	"errors"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// Names of the JetStream resources triggers use. events/jetstream.EnsureStreams declares
// the stream and the bucket.
const (
	// TriggersBucket is the key-value bucket of every workspace's triggers, keyed
	// "<workspace>.<name>".
	TriggersBucket = dlcjs.TriggersBucket
	// InboundStream keeps the inbound events triggers listen to.
	InboundStream = dlcjs.InboundStream
	// DefaultConsumer is the name of the dispatcher's durable consumer on InboundStream.
	DefaultConsumer = "dlc-triggers"
)

// InboundSubjects are the subjects InboundStream captures: programs' trigger events and
// S3 bucket notifications, per workspace. They are one token deeper than nothing else
// OpenDLC publishes (dlc.<workspace>.trigger.<name>.fired is an outbound event, in
// DLC_EVENTS).
var InboundSubjects = dlcjs.InboundSubjects

// Sentinel errors.
var (
	// ErrNotFound: no trigger of that name in that workspace.
	ErrNotFound = errors.New("triggers: trigger not found")
	// ErrInvalidName: a workspace or trigger name that is not a DNS label.
	ErrInvalidName = errors.New("triggers: invalid name")
	// ErrNoEventID: an inbound message from which no event id can be derived (neither a
	// CloudEvent nor an S3 notification record), such as the test event an S3 gateway
	// sends when it starts. It is acknowledged and ignored.
	ErrNoEventID = errors.New("triggers: the message has no event id")
)
