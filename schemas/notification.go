package schemas

import (
	"slices"
	"time"
)

// KindNotificationRule is the kind of a NotificationRule document.
const KindNotificationRule Kind = "NotificationRule"

// Defaults of a NotificationRule that Default fills in.
const (
	// DefaultMaxAttempts is how many times a delivery is tried before it is dead-lettered.
	DefaultMaxAttempts = 5
	// DefaultBackoffInitial is the wait after the first failed attempt.
	DefaultBackoffInitial = Duration(time.Second)
	// DefaultBackoffMax caps the wait between attempts.
	DefaultBackoffMax = Duration(time.Minute)
	// DefaultWebhookTimeout bounds one webhook request.
	DefaultWebhookTimeout = Duration(10 * time.Second)
)

// NotificationRule sends the events of its workspace that it matches to a webhook, to
// another NATS subject, or to both. Deliveries of one rule are ordered per job, retried
// with exponential backoff and, after Spec.Delivery.MaxAttempts failures, published to a
// dead-letter subject.
type NotificationRule struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be NotificationRule.
	Kind Kind `json:"kind"`
	// Metadata names the rule and the workspace whose events it sees.
	Metadata ObjectMeta `json:"metadata"`
	// Spec says which events the rule matches and where they go.
	Spec NotificationRuleSpec `json:"spec"`
}

// NotificationRuleSpec is what a rule matches and where it delivers. At least one of
// Webhook and Subject must be set.
type NotificationRuleSpec struct {
	// Match selects events; an empty match selects every event of the workspace.
	Match NotificationMatch `json:"match,omitempty,omitzero"`
	// Webhook receives each matched event as an HTTP POST of its CloudEvent JSON.
	Webhook *WebhookTarget `json:"webhook,omitempty"`
	// Subject is a NATS subject each matched event is forwarded to. A subject in the dlc
	// namespace must be under dlc.<workspace>.notify., where the DLC_NOTIFY stream keeps it;
	// subjects starting with '_' (reply inboxes) are refused.
	Subject string `json:"subject,omitempty" jsonschema:"maxLength=255,pattern=^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$"`
	// Delivery bounds the attempts of each delivery and the waits between them.
	Delivery DeliveryPolicy `json:"delivery,omitempty,omitzero"`
	// DeadLetterSubject receives a delivery that failed MaxAttempts times: the event, the
	// rule and the last error. It must be under dlc.<workspace>.notify.; default
	// dlc.<workspace>.notify.deadletter.
	DeadLetterSubject string `json:"deadLetterSubject,omitempty" jsonschema:"maxLength=255,pattern=^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$"`
}

// NotificationMatch selects events. Every non-empty criterion must hold; within a list,
// any entry may match.
type NotificationMatch struct {
	// Types are event types, such as opendlc.job.phase.v1; empty matches every type.
	Types []string `json:"types,omitempty" jsonschema:"maxItems=16,maxLength=128,pattern=^opendlc(\\.[a-z0-9]+)+\\.v[0-9]+$"`
	// Phases match the phase an event reports (data.phase). An event without a phase,
	// such as a metric report, does not match a rule that lists phases.
	Phases []JobPhase `json:"phases,omitempty" jsonschema:"maxItems=16,enum=Pending,enum=Queued,enum=HealthCheck,enum=Launching,enum=Running,enum=Restarting,enum=Succeeded,enum=Failed,enum=Stopped"`
	// Labels must all be present, with these values, in the event's labels (data.labels,
	// the job's metadata.labels).
	Labels map[string]string `json:"labels,omitempty"`
	// Jobs are the names of the jobs whose events match; empty matches every job.
	Jobs []string `json:"jobs,omitempty" jsonschema:"maxItems=64,maxLength=50,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
}

// WebhookTarget is an HTTP endpoint that receives events. Each request carries the
// headers Content-Type: application/cloudevents+json, X-OpenDLC-Event-Id,
// X-OpenDLC-Delivery-Attempt and X-OpenDLC-Signature: sha256=<hex HMAC-SHA256 of the
// body>. Delivery is at least once: receivers drop repeats by event id.
type WebhookTarget struct {
	// URL is an http or https URL. Redirects are not followed.
	URL string `json:"url" jsonschema:"maxLength=2048"`
	// Secret is the HMAC key that signs each body. It is stored with the rule, in
	// clear, where anyone who can read the workspace's rules can read it; prefer
	// SecretRef. Exactly one of Secret and SecretRef must be set.
	Secret string `json:"secret,omitempty" jsonschema:"minLength=16,maxLength=256"`
	// SecretRef names a secret that the dispatcher resolves when it delivers, so the key
	// is not stored with the rule.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Headers are added to each request. They are stored with the rule as Secret is.
	// Content-Type, Content-Length, Host, Connection, Transfer-Encoding and X-OpenDLC-*
	// are set by the dispatcher and cannot be given here.
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds one request, at most 5m; default 10s.
	Timeout Duration `json:"timeout,omitempty"`
}

// SecretRef names a secret of the rule's workspace held outside the rule.
type SecretRef struct {
	// Name is the secret's name, a DNS label.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Key selects one value of a secret that holds several; empty for the only one.
	Key string `json:"key,omitempty" jsonschema:"maxLength=253"`
}

// DeliveryPolicy bounds the attempts of one delivery.
type DeliveryPolicy struct {
	// MaxAttempts is how many times a delivery is tried before it is dead-lettered, from
	// 1 to 20; 0 (or unset) means 5.
	MaxAttempts int32 `json:"maxAttempts,omitempty" jsonschema:"minimum=0,maximum=20"`
	// Backoff is the wait between attempts.
	Backoff Backoff `json:"backoff,omitempty,omitzero"`
}

// Backoff is an exponential backoff: the wait after attempt n is Initial * 2^(n-1),
// capped at Max.
type Backoff struct {
	// Initial is the wait after the first failed attempt; default 1s.
	Initial Duration `json:"initial,omitempty"`
	// Max caps the wait, at most 1h; default 1m.
	Max Duration `json:"max,omitempty"`
}

// Delay returns the wait after failed attempt n (from 1): Initial * 2^(n-1), capped at
// Max.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial.D()
	for i := 1; i < n && d < b.Max.D(); i++ {
		d *= 2
	}
	return min(d, b.Max.D())
}

// EventFacts are what a rule's match looks at in one event.
type EventFacts struct {
	// Type is the event's type.
	Type string
	// Job is the name of the job the event is about; empty for other events.
	Job string
	// Phase is the phase the event reports; empty when it reports none.
	Phase string
	// Labels are the labels the event carries.
	Labels map[string]string
}

// Matches reports whether an event with facts f is selected by m.
func (m *NotificationMatch) Matches(f EventFacts) bool {
	if len(m.Types) > 0 && !slices.Contains(m.Types, f.Type) {
		return false
	}
	if len(m.Phases) > 0 && (f.Phase == "" || !slices.Contains(m.Phases, JobPhase(f.Phase))) {
		return false
	}
	if len(m.Jobs) > 0 && (f.Job == "" || !slices.Contains(m.Jobs, f.Job)) {
		return false
	}
	for k, v := range m.Labels {
		if got, ok := f.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// NotifySubjectPrefix is the prefix of a workspace's notification subjects,
// "dlc.<workspace>.notify.": the dead-letter subject and forwarded events that stay in
// the dlc namespace live under it.
func NotifySubjectPrefix(workspace string) string {
	return "dlc." + workspace + ".notify."
}

// DefaultDeadLetterSubject is the dead-letter subject of a workspace's rules unless they
// set their own.
func DefaultDeadLetterSubject(workspace string) string {
	return NotifySubjectPrefix(workspace) + "deadletter"
}
