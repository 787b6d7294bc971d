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
// arrive while no dispatcher runs are handled when one starts.
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
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// Names of the JetStream resources triggers use.
const (
	// TriggersBucket is the key-value bucket of every workspace's triggers, keyed
	// "<workspace>.<name>".
	TriggersBucket = "DLC_TRIGGERS"
	// InboundStream keeps the inbound events triggers listen to.
	InboundStream = "DLC_INBOUND"
	// DefaultConsumer is the name of the dispatcher's durable consumer on InboundStream.
	DefaultConsumer = "dlc-triggers"
)

// InboundSubjects are the subjects InboundStream captures: programs' trigger events and
// S3 bucket notifications, per workspace. They are one token deeper than nothing else
// OpenDLC publishes (dlc.<workspace>.trigger.<name>.fired is an outbound event, in
// DLC_EVENTS).
var InboundSubjects = []string{"dlc.*.trigger.*", "dlc.*.s3.*"}

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

// StreamOptions configure EnsureStreams.
type StreamOptions struct {
	// Retention limits DLC_INBOUND.
	Retention dlcjs.Retention
	// History is how many revisions of each trigger DLC_TRIGGERS keeps.
	History uint8
}

// StreamOption changes StreamOptions.
type StreamOption func(*StreamOptions) error

// WithInboundRetention sets DLC_INBOUND's limits. Default: 7 days, 1 GiB, unlimited per
// subject, 1 hour duplicate window (a publisher that sets Nats-Msg-Id has a repeat
// within it dropped before any dispatcher sees it).
func WithInboundRetention(r dlcjs.Retention) StreamOption {
	return func(o *StreamOptions) error { o.Retention = r; return nil }
}

// WithHistory sets how many revisions of each trigger are kept, 1 to 64. Default 5.
func WithHistory(n uint8) StreamOption {
	return func(o *StreamOptions) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("triggers: history %d: must be 1 to 64", n)
		}
		o.History = n
		return nil
	}
}

// EnsureStreams creates or updates what triggers need: the DLC_INBOUND stream and the
// DLC_TRIGGERS bucket. DLC_EVENTS, where fired events go, is created by
// events/jetstream's Client.EnsureStreams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...StreamOption) error {
	o := StreamOptions{
		Retention: dlcjs.Retention{MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		History:   5,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              InboundStream,
		Description:       "OpenDLC inbound events for triggers: dlc.<workspace>.trigger.<name> and S3 notifications",
		Subjects:          InboundSubjects,
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            o.Retention.MaxAge,
		MaxBytes:          orUnlimited(o.Retention.MaxBytes),
		MaxMsgsPerSubject: orUnlimited(o.Retention.MaxMsgsPerSubject),
		Duplicates:        o.Retention.Duplicates,
	})
	if err != nil {
		return fmt.Errorf("triggers: ensure stream %s: %w", InboundStream, err)
	}
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      TriggersBucket,
		Description: "OpenDLC triggers, keyed <workspace>.<name>",
		History:     o.History,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("triggers: ensure bucket %s: %w", TriggersBucket, err)
	}
	return nil
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
