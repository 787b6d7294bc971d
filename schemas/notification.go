package schemas

import (
	"slices"
	"strconv"
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
	// DefaultSMTPTimeout bounds one e-mail delivery.
	DefaultSMTPTimeout = Duration(30 * time.Second)
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
// Webhook, Email and Subject must be set.
type NotificationRuleSpec struct {
	// Match selects events; an empty match selects every event of the workspace. With
	// Alert, it selects the jobs the alert watches, by jobs and labels only.
	Match NotificationMatch `json:"match,omitempty,omitzero"`
	// Alert makes the rule a threshold alert: instead of delivering the events it
	// matches, it watches a metric of every running job that Match selects and delivers
	// an opendlc.alert.v1 event when the condition starts to hold (firing) and when it
	// stops (resolved). See docs/alerts.md.
	Alert *NotificationAlert `json:"alert,omitempty"`
	// Webhook receives each matched event as an HTTP POST: its CloudEvent JSON, or a
	// chat message (see WebhookTarget.Format).
	Webhook *WebhookTarget `json:"webhook,omitempty"`
	// Email sends each matched event as a plain-text e-mail over SMTP.
	Email *EmailTarget `json:"email,omitempty"`
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
	// Phases match the phase an event reports (data.phase): a job's, an experiment's
	// (also Stopping), a trial's, or a pipeline run's or step's (also Skipped and
	// Cancelled). An event without a phase, such as a metric report, does not match a
	// rule that lists phases.
	Phases []JobPhase `json:"phases,omitempty" jsonschema:"maxItems=16,enum=Pending,enum=Queued,enum=HealthCheck,enum=Launching,enum=Running,enum=Restarting,enum=Succeeded,enum=Failed,enum=Stopped,enum=Stopping,enum=Skipped,enum=Cancelled"`
	// Labels must all be present, with these values, in the event's labels (data.labels,
	// the job's metadata.labels).
	Labels map[string]string `json:"labels,omitempty"`
	// Jobs are the names of the jobs whose events match; empty matches every job.
	Jobs []string `json:"jobs,omitempty" jsonschema:"maxItems=64,maxLength=50,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Reasons match the reason an event gives (data.reason), such as QuotaExceeded or
	// BackoffLimitExceeded. An event without a reason does not match a rule that lists
	// reasons.
	Reasons []string `json:"reasons,omitempty" jsonschema:"maxItems=32,maxLength=128,pattern=^[A-Za-z][A-Za-z0-9]*$"`
	// Experiments are the names of the experiments whose events (phase and trial events)
	// match; empty matches every experiment.
	Experiments []string `json:"experiments,omitempty" jsonschema:"maxItems=64,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Pipelines are the names of the pipelines whose run and step events match; empty
	// matches every pipeline.
	Pipelines []string `json:"pipelines,omitempty" jsonschema:"maxItems=64,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Schedules are the names of the schedules whose run events match; empty matches
	// every schedule.
	Schedules []string `json:"schedules,omitempty" jsonschema:"maxItems=64,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
}

// NotificationAlert is a condition on one metric of a running job. Exactly one of Above,
// Below and AbsentFor is set; For goes with Above and Below.
type NotificationAlert struct {
	// Metric is a resource metric (cpu, memory.bytes, memory, gpu.utilization,
	// gpu.memory: opendlc.job.resources.v1 samples) or a training metric that the job
	// reports (opendlc.job.metric.v1 values, such as loss).
	Metric string `json:"metric" jsonschema:"maxLength=128,pattern=^[A-Za-z0-9_.:/-]+$"`
	// Above holds when every sample of every replica of the job in the window is
	// greater than this.
	Above *float64 `json:"above,omitempty"`
	// Below holds when every sample of every replica of the job in the window is less
	// than this.
	Below *float64 `json:"below,omitempty"`
	// For is how long Above or Below must hold, without a sample that breaks it, before
	// the alert fires: from 1s to 24h.
	For Duration `json:"for,omitempty"`
	// AbsentFor fires when a running job reports no sample of Metric for this long:
	// from 1s to 24h.
	AbsentFor Duration `json:"absentFor,omitempty"`
}

// Condition says the alert's condition in words: "below 10 for 15m0s", "above 90 for
// 1m0s", "absent for 10m0s".
func (a *NotificationAlert) Condition() string {
	switch {
	case a.AbsentFor != 0:
		return "absent for " + a.AbsentFor.D().String()
	case a.Above != nil:
		return "above " + strconv.FormatFloat(*a.Above, 'g', -1, 64) + " for " + a.For.D().String()
	case a.Below != nil:
		return "below " + strconv.FormatFloat(*a.Below, 'g', -1, 64) + " for " + a.For.D().String()
	}
	return ""
}

// Bounds of an alert's windows.
const (
	// MinAlertWindow is the shortest for and absentFor; short, so that tests are fast.
	MinAlertWindow = Duration(time.Second)
	// MaxAlertWindow is the longest for and absentFor.
	MaxAlertWindow = Duration(24 * time.Hour)
)

// WebhookTarget is an HTTP endpoint that receives events. Each request carries the
// headers Content-Type (application/cloudevents+json for the cloudevents format),
// X-OpenDLC-Event-Id, X-OpenDLC-Delivery-Attempt and X-OpenDLC-Signature: sha256=<hex
// HMAC-SHA256 of the body>. Delivery is at least once: receivers drop repeats by event
// id.
type WebhookTarget struct {
	// URL is an http or https URL. Redirects are not followed.
	URL string `json:"url" jsonschema:"maxLength=2048"`
	// Format is what the body holds: cloudevents (the default: the CloudEvent JSON as
	// published), slack (a Slack-compatible incoming-webhook message, which Mattermost
	// and Rocket.Chat accept too), dingtalk (a DingTalk robot markdown message), feishu
	// (a Feishu/Lark custom bot card), wecom (a WeCom group robot markdown message) or
	// template (Template's output).
	Format WebhookFormat `json:"format,omitempty" jsonschema:"enum=cloudevents,enum=slack,enum=dingtalk,enum=feishu,enum=wecom,enum=template"`
	// Template makes the body of the template format; it must be set for that format
	// only.
	Template *WebhookTemplate `json:"template,omitempty"`
	// BotSecret is the signing secret of a DingTalk or Feishu robot whose signature
	// check is on ("SEC..." for DingTalk): DingTalk requests then carry the timestamp
	// and sign query parameters, Feishu bodies the timestamp and sign fields. It is
	// stored with the rule, in clear, as Secret is; prefer BotSecretRef. Only for the
	// dingtalk and feishu formats.
	BotSecret string `json:"botSecret,omitempty" jsonschema:"maxLength=256"`
	// BotSecretRef names a secret holding BotSecret, resolved at each delivery.
	BotSecretRef *SecretRef `json:"botSecretRef,omitempty"`
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

// WebhookFormat is the shape of a webhook's body.
type WebhookFormat string

// Webhook formats.
const (
	FormatCloudEvents WebhookFormat = "cloudevents"
	FormatSlack       WebhookFormat = "slack"
	FormatDingTalk    WebhookFormat = "dingtalk"
	FormatFeishu      WebhookFormat = "feishu"
	FormatWeCom       WebhookFormat = "wecom"
	FormatTemplate    WebhookFormat = "template"
)

// WebhookTemplate is a Go text/template that makes a webhook's body from the event's
// message (notify.Message: .Title, .Text, .Kind, .Name, .Workspace, .Phase, .Reason,
// .Message, .Link, .Event...). Only the functions json (a value as JSON) and the
// template package's own are available; the output is bounded in size and time.
type WebhookTemplate struct {
	// Body is the template.
	Body string `json:"body" jsonschema:"maxLength=16384"`
	// ContentType is the Content-Type of the body; default application/json.
	ContentType string `json:"contentType,omitempty" jsonschema:"maxLength=128"`
}

// EmailTarget sends each matched event as a plain-text e-mail: the subject is the
// event's one-line title, the body its human-readable message.
type EmailTarget struct {
	// To are the recipients' addresses (user@example.com or "Name <user@example.com>").
	To []string `json:"to" jsonschema:"minItems=1,maxItems=32,maxLength=254"`
	// Cc are the addresses that receive a copy.
	Cc []string `json:"cc,omitempty" jsonschema:"maxItems=32,maxLength=254"`
	// From is the sender's address.
	From string `json:"from" jsonschema:"maxLength=254"`
	// SMTP is the server that relays the mail.
	SMTP SMTPServer `json:"smtp"`
}

// SMTPServer is an SMTP submission server.
type SMTPServer struct {
	// Host is the server's name or address. The addresses webhooks may not reach
	// (loopback, private...) are refused unless the dispatcher's allow-list names them.
	Host string `json:"host" jsonschema:"maxLength=253"`
	// Port is the server's port; default 587 (465 for implicit TLS).
	Port int32 `json:"port,omitempty" jsonschema:"minimum=0,maximum=65535"`
	// TLS is starttls (the default: the session must be upgraded with STARTTLS before
	// anything is sent), implicit (TLS from the first byte, usually port 465) or none
	// (plain text: only without credentials, for a relay on a trusted network).
	TLS SMTPTLS `json:"tls,omitempty" jsonschema:"enum=starttls,enum=implicit,enum=none"`
	// Username and PasswordRef authenticate with SMTP AUTH PLAIN, over TLS only.
	Username string `json:"username,omitempty" jsonschema:"maxLength=256"`
	// PasswordRef names the secret that holds the password.
	PasswordRef *SecretRef `json:"passwordRef,omitempty"`
	// Timeout bounds one delivery, at most 5m; default 30s.
	Timeout Duration `json:"timeout,omitempty"`
}

// SMTPTLS is how an SMTP session is protected.
type SMTPTLS string

// SMTP TLS policies.
const (
	SMTPStartTLS SMTPTLS = "starttls"
	SMTPImplicit SMTPTLS = "implicit"
	SMTPNoTLS    SMTPTLS = "none"
)

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
	// Reason is the reason the event gives (data.reason); empty when it gives none.
	Reason string
	// Experiment, Pipeline and Schedule name the experiment, pipeline or schedule the
	// event is about (data.experiment, data.pipeline, data.schedule); empty for other
	// events. A pipeline step's event names both its pipeline and, for a job step, its
	// job.
	Experiment string
	// Pipeline: see Experiment.
	Pipeline string
	// Schedule: see Experiment.
	Schedule string
}

// Matches reports whether an event with facts f is selected by m.
func (m *NotificationMatch) Matches(f EventFacts) bool {
	if len(m.Types) > 0 && !slices.Contains(m.Types, f.Type) {
		return false
	}
	if len(m.Phases) > 0 && (f.Phase == "" || !slices.Contains(m.Phases, JobPhase(f.Phase))) {
		return false
	}
	if !matchName(m.Jobs, f.Job) || !matchName(m.Reasons, f.Reason) || !matchName(m.Experiments, f.Experiment) ||
		!matchName(m.Pipelines, f.Pipeline) || !matchName(m.Schedules, f.Schedule) {
		return false
	}
	for k, v := range m.Labels {
		if got, ok := f.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// matchName reports whether got is one of want, or want is empty: a criterion that
// lists values never matches an event that has none.
func matchName(want []string, got string) bool {
	return len(want) == 0 || (got != "" && slices.Contains(want, got))
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
