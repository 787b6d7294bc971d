package jetstream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Stream names.
const (
	EventsStream = "DLC_EVENTS"
	LogsStream   = "DLC_LOGS"
	// AuditStream keeps the API's audit events (events.AuditSubjects).
	AuditStream = "DLC_AUDIT"
	// NotifyStream keeps what notifications publish in the dlc namespace: dead letters
	// and forwarded events, on dlc.<workspace>.notify.> (package notify).
	NotifyStream = "DLC_NOTIFY"
	// InboundStream keeps the inbound events triggers listen to (package triggers).
	InboundStream = "DLC_INBOUND"
	// NotifySubjects is the subject filter of NotifyStream.
	NotifySubjects = "dlc.*.notify.>"
)

// Key-value bucket names.
const (
	// RulesBucket is the key-value bucket of every workspace's notification rules,
	// keyed "<workspace>.<name>" (package notify).
	RulesBucket = "DLC_RULES"
	// TriggersBucket is the key-value bucket of every workspace's triggers, keyed
	// "<workspace>.<name>" (package triggers).
	TriggersBucket = "DLC_TRIGGERS"
	// PipelineTemplatesBucket is the key-value bucket of every workspace's stored
	// pipeline templates, keyed "<workspace>.<name>" (package templates).
	PipelineTemplatesBucket = "DLC_PIPELINE_TEMPLATES"
	// AuthBucket is the key-value bucket of tokens and workspaces (package auth).
	AuthBucket = "DLC_AUTH"
	// DeletedJobsBucket records the job runs deleted without --purge (package
	// service), keyed <workspace>.<uid>: they leave the listings but stay readable.
	DeletedJobsBucket = "DLC_DELETED_JOBS"
	// NotifyConsumersBucket records the durable consumers the notification dispatcher
	// created, keyed "<prefix>.<workspace>" (package notify): the dispatcher resumes
	// only a consumer recorded here, which only the stack's identities can write, never
	// one that merely has a name like it (a workspace reader may create consumers).
	NotifyConsumersBucket = "DLC_NOTIFY_CONSUMERS"
	// NotifyRedriveBucket records the dead letters queued for redelivery, keyed
	// "<workspace>.<rule>.<DLC_NOTIFY sequence>" (package notify): each is queued once,
	// and the dispatcher marks it done after delivering it.
	NotifyRedriveBucket = "DLC_NOTIFY_REDRIVE"
	// AlertsBucket keeps the state of the notification rules' alerts, keyed
	// "<workspace>.<rule>.<job>" (package notify): whether each fires, since when, and
	// the last sample of an absent metric, so a restarted dispatcher goes on where it was.
	AlertsBucket = "DLC_ALERTS"
)

// Subjects the streams capture.
var (
	// EventSubjects are the subjects the events stream captures: every kind's events
	// (streamKinds, kinds.go) and the nodes' health.
	EventSubjects = append(kindWildcards(func(k kindSubjects) []subjectOf { return k.events }),
		"dlc.*.node.*.health")
	// LogSubjects are the subjects the log stream captures: every kind's logs.
	LogSubjects = kindWildcards(func(k kindSubjects) []subjectOf { return k.logs })
	// InboundSubjects are the subjects InboundStream captures: programs' trigger events
	// (every kind's inbound subjects) and S3 bucket notifications, per workspace. They
	// are one token deeper than anything else OpenDLC publishes
	// (dlc.<workspace>.trigger.<name>.fired is an outbound event, in DLC_EVENTS).
	// schemas.S3RawEventSubject holds the S3 gateway's notifications before they are
	// routed to their workspace.
	InboundSubjects = append(kindWildcards(func(k kindSubjects) []subjectOf { return k.inbound }),
		"dlc.*.s3.*", schemas.S3RawEventSubject)
)

// Retention limits one stream, like the TTL and size of an SLS logstore.
type Retention struct {
	// MaxAge drops messages older than this; zero keeps them forever.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size; zero is unlimited.
	MaxBytes int64
	// MaxMsgsPerSubject bounds each subject (one job's status, one replica's logs);
	// zero is unlimited.
	MaxMsgsPerSubject int64
	// Duplicates is the window in which a repeated Nats-Msg-Id is dropped. It must
	// cover the longest time an activity may take to be retried.
	Duplicates time.Duration
}

// Options are the limits of every stream and bucket EnsureStreams declares.
type Options struct {
	Events  Retention
	Logs    Retention
	Audit   Retention
	Notify  Retention
	Inbound Retention
	// RuleHistory and TriggerHistory are how many revisions of each notification rule
	// and trigger their buckets keep.
	RuleHistory, TriggerHistory uint8
	// Replicas is how many servers of a NATS cluster hold each stream and bucket (1 to
	// 5; 3 survives the loss of one server). Zero keeps what an existing stream or
	// bucket has and makes a new one with 1 (WithReplicas).
	Replicas int
}

// Option changes Options.
type Option func(*Options) error

// WithEventRetention sets the status/metric stream's limits. Default: 30 days, 1 GiB,
// unlimited per subject, 1 hour duplicate window.
func WithEventRetention(r Retention) Option {
	return func(o *Options) error { o.Events = r; return nil }
}

// WithLogRetention sets the log stream's limits. Default: 7 days, 4 GiB, unlimited per
// subject, 1 hour duplicate window.
func WithLogRetention(r Retention) Option {
	return func(o *Options) error { o.Logs = r; return nil }
}

// WithAuditRetention sets the audit stream's limits. Default: 365 days, 1 GiB,
// unlimited per subject, 1 hour duplicate window.
func WithAuditRetention(r Retention) Option {
	return func(o *Options) error { o.Audit = r; return nil }
}

// WithNotifyRetention sets DLC_NOTIFY's limits. Default: 30 days, 1 GiB, unlimited per
// subject, 1 hour duplicate window. The duplicate window is how long a repeated
// forward or dead letter of the same event is recognised.
func WithNotifyRetention(r Retention) Option {
	return func(o *Options) error { o.Notify = r; return nil }
}

// WithInboundRetention sets DLC_INBOUND's limits. Default: 7 days, 1 GiB, unlimited per
// subject, 1 hour duplicate window (a publisher that sets Nats-Msg-Id has a repeat
// within it dropped before any dispatcher sees it).
func WithInboundRetention(r Retention) Option {
	return func(o *Options) error { o.Inbound = r; return nil }
}

// WithRuleHistory sets how many revisions of each notification rule are kept, 1 to 64.
// Default 5.
func WithRuleHistory(n uint8) Option {
	return func(o *Options) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("jetstream: rule history %d: must be 1 to 64", n)
		}
		o.RuleHistory = n
		return nil
	}
}

// WithTriggerHistory sets how many revisions of each trigger are kept, 1 to 64.
// Default 5.
func WithTriggerHistory(n uint8) Option {
	return func(o *Options) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("jetstream: trigger history %d: must be 1 to 64", n)
		}
		o.TriggerHistory = n
		return nil
	}
}

// MaxReplicas is the most copies JetStream keeps of a stream.
const MaxReplicas = 5

// WithReplicas sets how many servers of a NATS cluster hold each stream and bucket, 1
// to MaxReplicas: 3 on a three-server cluster keeps every stream and bucket written
// and readable while one server is down. A single server takes only 1. Without this
// option an existing stream or bucket keeps its count and a new one gets 1, so a
// process started without it never scales down what another process declared.
func WithReplicas(n int) Option {
	return func(o *Options) error {
		if n < 1 || n > MaxReplicas {
			return fmt.Errorf("jetstream: replicas %d: must be 1 to %d", n, MaxReplicas)
		}
		o.Replicas = n
		return nil
	}
}

// redriveTTL keeps a redrive record a day longer than DLC_NOTIFY keeps dead letters;
// forever when they are kept forever.
func redriveTTL(notifyMaxAge time.Duration) time.Duration {
	if notifyMaxAge <= 0 {
		return 0
	}
	return notifyMaxAge + 24*time.Hour
}

// DefaultOptions are the limits EnsureStreams applies where no option changes them.
func DefaultOptions() Options {
	return Options{
		Events:         Retention{MaxAge: 30 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		Logs:           Retention{MaxAge: 7 * 24 * time.Hour, MaxBytes: 4 << 30, Duplicates: time.Hour},
		Audit:          Retention{MaxAge: 365 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		Notify:         Retention{MaxAge: 30 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		Inbound:        Retention{MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		RuleHistory:    5,
		TriggerHistory: 5,
	}
}

// EnsureStreams creates or updates every stream and key-value bucket of OpenDLC, in
// one place: the event, log and audit streams; DLC_NOTIFY and the rules bucket of
// notifications; DLC_INBOUND and the triggers bucket; and the tokens bucket of auth.
// Every one is file-backed; streams keep messages by limits (the oldest are discarded
// first). It is idempotent: every process runs it at start (app.Start). With
// WithReplicas each is kept on that many servers of the cluster.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...Option) error {
	o := DefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		// Without a deadline each call gets the client's default of 5 s, which creating
		// a replicated stream on a loaded cluster can take longer than.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ensureTimeout)
		defer cancel()
	}
	streams := []struct {
		name, description string
		subjects          []string
		r                 Retention
	}{
		{EventsStream, "", EventSubjects, o.Events},
		{LogsStream, "", LogSubjects, o.Logs},
		{AuditStream, "", []string{events.AuditSubjects}, o.Audit},
		{NotifyStream, "OpenDLC notifications: dead letters and forwarded events", []string{NotifySubjects}, o.Notify},
		{InboundStream, "OpenDLC inbound events for triggers: dlc.<workspace>.trigger.<name> and S3 notifications", InboundSubjects, o.Inbound},
	}
	for _, s := range streams {
		cfg := jetstream.StreamConfig{
			Name:              s.name,
			Description:       s.description,
			Subjects:          s.subjects,
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			Discard:           jetstream.DiscardOld,
			MaxAge:            s.r.MaxAge,
			MaxBytes:          orUnlimited(s.r.MaxBytes),
			MaxMsgsPerSubject: orUnlimited(s.r.MaxMsgsPerSubject),
			Duplicates:        s.r.Duplicates,
			Replicas:          replicasOf(ctx, js, s.name, o.Replicas),
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("jetstream: ensure stream %s: %w", s.name, err)
		}
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: RulesBucket, Description: "OpenDLC notification rules, keyed <workspace>.<name>", History: o.RuleHistory, Storage: jetstream.FileStorage},
		{Bucket: TriggersBucket, Description: "OpenDLC triggers, keyed <workspace>.<name>", History: o.TriggerHistory, Storage: jetstream.FileStorage},
		{Bucket: AuthBucket, Description: "OpenDLC tokens (hashed) and workspaces", History: 1, Storage: jetstream.FileStorage},
		{Bucket: PipelineTemplatesBucket, Description: "OpenDLC pipeline templates, keyed <workspace>.<name>", History: o.TriggerHistory, Storage: jetstream.FileStorage},
		{Bucket: DeletedJobsBucket, Description: "OpenDLC deleted job runs, keyed <workspace>.<uid>", History: 1, Storage: jetstream.FileStorage},
		{Bucket: NotifyConsumersBucket, Description: "OpenDLC notification dispatchers' consumers, keyed <prefix>.<workspace>", History: 1, Storage: jetstream.FileStorage},
		// A key outlives its dead letter, so that a dead letter is never queued twice.
		{Bucket: NotifyRedriveBucket, Description: "OpenDLC dead letters queued for redelivery, keyed <workspace>.<rule>.<sequence>", History: 1,
			Storage: jetstream.FileStorage, TTL: redriveTTL(o.Notify.MaxAge)},
		{Bucket: AlertsBucket, Description: "OpenDLC notification alerts' state, keyed <workspace>.<rule>.<job>", History: 1, Storage: jetstream.FileStorage},
	}
	for _, b := range buckets {
		b.Replicas = replicasOf(ctx, js, kvStreamPrefix+b.Bucket, o.Replicas)
		if _, err := js.CreateOrUpdateKeyValue(ctx, b); err != nil {
			return fmt.Errorf("jetstream: ensure bucket %s: %w", b.Bucket, err)
		}
	}
	return nil
}

// ensureTimeout bounds EnsureStreams when its context has no deadline.
const ensureTimeout = time.Minute

// kvStreamPrefix starts the name of the stream that holds a key-value bucket.
const kvStreamPrefix = "KV_"

// replicasOf is the replica count to declare stream with: want when set, else what the
// stream has now, else 1 (a stream that cannot be looked up is treated as new: the
// create that follows reports the real error).
func replicasOf(ctx context.Context, js jetstream.JetStream, stream string, want int) int {
	if want > 0 {
		return want
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 1
	}
	return max(s.CachedInfo().Config.Replicas, 1)
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
