// Package notify delivers OpenDLC's events to the people and systems that asked for them.
// A NotificationRule (schemas) selects events of one workspace and names a webhook, a
// NATS subject, or both. Rules live in the JetStream key-value bucket DLC_RULES, managed
// through Store; a Dispatcher watches the bucket, so changes apply without a restart, and
// delivers every match:
//
//   - webhooks get an HTTP POST of the CloudEvent JSON, exactly as published, or of a
//     human-readable message in a chat platform's shape (Slack-compatible, DingTalk,
//     Feishu/Lark, WeCom) or a user template's (format.go, message.go), signed with
//     HMAC-SHA256 (see VerifySignature); a 2xx answer is a delivery, anything else is
//     retried with exponential backoff, and after the rule's maxAttempts failures the
//     event is published to the rule's dead-letter subject (see DeadLetter);
//   - e-mail recipients get the message as plain text through the rule's SMTP server
//     (email.go), retried and dead-lettered like webhooks;
//   - subjects get the event published with Nats-Msg-Id "<event id>:<rule>", so a stream
//     that holds the subject drops a repeat.
//
// # Reading events
//
// The dispatcher reads DLC_EVENTS with one durable pull consumer per workspace that has
// rules ("dlc-notify-<workspace>_<random>", filtered on dlc.<workspace>.>; the random
// part keeps workspace readers from reaching it, see ConsumerNameOf), so one workspace's
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
// Dead letters are sent again with Redriver (redrive.go): each is queued once in the
// DLC_NOTIFY_REDRIVE bucket, and the dispatcher delivers what is queued.
//
// One dispatcher runs per consumer prefix.
package notify

import (
	"errors"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// Names of the JetStream resources notify uses. events/jetstream.EnsureStreams declares
// the stream and the bucket.
const (
	// RulesBucket is the key-value bucket of every workspace's rules, keyed
	// "<workspace>.<name>".
	RulesBucket = dlcjs.RulesBucket
	// NotifyStream keeps what notifications publish in the dlc namespace: dead letters
	// and forwarded events, on dlc.<workspace>.notify.>.
	NotifyStream = dlcjs.NotifyStream
	// NotifySubjects is the subject filter of NotifyStream.
	NotifySubjects = dlcjs.NotifySubjects
	// DefaultConsumerPrefix starts the name of each workspace's durable consumer on
	// DLC_EVENTS: "dlc-notify-<workspace>_<random>".
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
