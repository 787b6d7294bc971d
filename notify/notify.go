// Package notify delivers OpenDLC's events to the people and systems that asked for them.
// A NotificationRule (schemas) selects events of one workspace and names a webhook, a
// NATS subject, or both. Rules live in the JetStream key-value bucket DLC_RULES, managed
// through Store; a Dispatcher watches the bucket, so changes apply without a restart, and
// delivers every match:
//
//   - webhooks get an HTTP POST of the CloudEvent JSON, exactly as published, signed with
//     HMAC-SHA256 (see VerifySignature); a 2xx answer is a delivery, anything else is
//     retried with exponential backoff, and after the rule's maxAttempts failures the
//     event is published to the rule's dead-letter subject (see DeadLetter);
//   - subjects get the event published with Nats-Msg-Id "<event id>:<rule>", so a stream
//     that holds the subject drops a repeat.
//
// # Reading events
//
// The dispatcher reads DLC_EVENTS with one durable pull consumer per workspace that has
// rules ("dlc-notify-<workspace>", filtered on dlc.<workspace>.>), so one workspace's
// backlog or slow endpoints never hold up another's, and a workspace without rules costs
// nothing. A workspace's consumer is created when its first rule appears and starts at
// that rule's creation (at most an hour back, WithMaxCatchUp); it is deleted when its
// last rule goes, so a later rule does not receive the events of the time without rules.
// Rules are evaluated when the dispatcher reads an event, not when it was published.
//
// # Guarantees
//
// Deliveries of one rule to one target are in event order per job: phase events arrive
// in the order of the transitions. Different jobs, rules and targets proceed in
// parallel, within WithConcurrency's bounds.
//
// An event is acknowledged on DLC_EVENTS only once every matching rule has delivered or
// dead-lettered it. A dispatcher that is closed while deliveries are unfinished, or that
// crashes, leaves those events unacknowledged; the next one rewinds the consumer to the
// first of them and delivers from there, in order. Delivery is therefore at least once:
// an event whose webhook request succeeded just before a crash, or that followed such
// an event on another job, may be posted again. Receivers drop repeats by the
// X-OpenDLC-Event-Id header (the event id, unique and stable). A graceful restart
// whose deliveries all finished repeats nothing.
//
// One dispatcher runs per consumer prefix.
package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// Names of the JetStream resources notify uses.
const (
	// RulesBucket is the key-value bucket of every workspace's rules, keyed
	// "<workspace>.<name>".
	RulesBucket = "DLC_RULES"
	// NotifyStream keeps what notifications publish in the dlc namespace: dead letters
	// and forwarded events, on dlc.<workspace>.notify.>.
	NotifyStream = "DLC_NOTIFY"
	// NotifySubjects is the subject filter of NotifyStream.
	NotifySubjects = "dlc.*.notify.>"
	// DefaultConsumerPrefix starts the name of each workspace's durable consumer on
	// DLC_EVENTS: "dlc-notify-<workspace>".
	DefaultConsumerPrefix = "dlc-notify"
)

// Headers of every webhook request (and, where they apply, of forwarded messages).
const (
	// ContentType is the Content-Type of webhook bodies: a structured CloudEvent.
	ContentType = "application/cloudevents+json"
	// HeaderSignature carries "sha256=<hex HMAC-SHA256(secret, body)>".
	HeaderSignature = "X-OpenDLC-Signature"
	// HeaderEventID carries the event id; receivers drop repeats by it.
	HeaderEventID = "X-OpenDLC-Event-Id"
	// HeaderAttempt carries the attempt number of this delivery, from 1. It starts from
	// 1 again when a restarted dispatcher delivers an event a second time.
	HeaderAttempt = "X-OpenDLC-Delivery-Attempt"
	// HeaderRule carries "<workspace>/<rule>".
	HeaderRule = "X-OpenDLC-Rule"
)

// Sentinel errors.
var (
	// ErrNotFound: no rule of that name in that workspace.
	ErrNotFound = errors.New("notify: rule not found")
	// ErrInvalidName: a workspace or rule name that is not a DNS label.
	ErrInvalidName = errors.New("notify: invalid name")
)

// StreamOptions configure EnsureStreams.
type StreamOptions struct {
	// Retention limits DLC_NOTIFY.
	Retention dlcjs.Retention
	// RuleHistory is how many revisions of each rule DLC_RULES keeps.
	RuleHistory uint8
}

// StreamOption changes StreamOptions.
type StreamOption func(*StreamOptions) error

// WithNotifyRetention sets DLC_NOTIFY's limits. Default: 30 days, 1 GiB, unlimited per
// subject, 1 hour duplicate window. The duplicate window is how long a repeated
// forward or dead letter of the same event is recognised.
func WithNotifyRetention(r dlcjs.Retention) StreamOption {
	return func(o *StreamOptions) error { o.Retention = r; return nil }
}

// WithRuleHistory sets how many revisions of each rule are kept, 1 to 64. Default 5.
func WithRuleHistory(n uint8) StreamOption {
	return func(o *StreamOptions) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("notify: rule history %d: must be 1 to 64", n)
		}
		o.RuleHistory = n
		return nil
	}
}

// EnsureStreams creates or updates what notifications need: the DLC_NOTIFY stream and
// the DLC_RULES bucket. DLC_EVENTS itself is created by events/jetstream's
// Client.EnsureStreams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...StreamOption) error {
	o := StreamOptions{
		Retention:   dlcjs.Retention{MaxAge: 30 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		RuleHistory: 5,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              NotifyStream,
		Description:       "OpenDLC notifications: dead letters and forwarded events",
		Subjects:          []string{NotifySubjects},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            o.Retention.MaxAge,
		MaxBytes:          orUnlimited(o.Retention.MaxBytes),
		MaxMsgsPerSubject: orUnlimited(o.Retention.MaxMsgsPerSubject),
		Duplicates:        o.Retention.Duplicates,
	})
	if err != nil {
		return fmt.Errorf("notify: ensure stream %s: %w", NotifyStream, err)
	}
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      RulesBucket,
		Description: "OpenDLC notification rules, keyed <workspace>.<name>",
		History:     o.RuleHistory,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("notify: ensure bucket %s: %w", RulesBucket, err)
	}
	return nil
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
