package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/invopop/jsonschema"
)

// The label a trigger puts on what it starts, and the owner annotation of a trigger.
const (
	// LabelTrigger names the trigger that started a pipeline run or a job.
	LabelTrigger = "opendlc.io/trigger"
	// AnnotationOwner is set by the server on a trigger it stores: the identity (API
	// token name) that applied it, under which the trigger's runs are listed
	// (DlcOwner). A value in the applied document is replaced.
	AnnotationOwner = "opendlc.io/owner"
	// AnnotationTriggerEvent is the id of the event a trigger started a job, pipeline
	// run or experiment for (the first of a debounced window's); run records name it.
	AnnotationTriggerEvent = "opendlc.io/trigger-event"
)

// KindTrigger is the kind of a Trigger document.
const KindTrigger Kind = "Trigger"

// Trigger starts a pipeline run or a job for every event on an inbound NATS subject that
// passes its filter. Events are JSON: a CloudEvent, or any other JSON document (such as
// an S3 bucket notification), which the trigger sees wrapped as {"id": ...,
// "subject": ..., "data": <the document>}; filter fields and ${event.<path>} refer to
// that envelope. What a trigger starts is named after the trigger and the event's id,
// so an event delivered twice starts it once (see docs/triggers.md).
type Trigger struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be Trigger.
	Kind Kind `json:"kind"`
	// Metadata names the trigger and its workspace; its labels are copied to what it
	// starts.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is what the trigger listens to and what it starts.
	Spec TriggerSpec `json:"spec"`
}

// TriggerSpec is a trigger's source, filter and action. The source is exactly one of
// Subject, Events and Webhook.
type TriggerSpec struct {
	// Subject is the NATS subject the trigger listens on, in its workspace:
	// dlc.<workspace>.trigger.<name> for events that programs publish, or
	// dlc.<workspace>.s3.<name> for S3 bucket notifications (the dev stack's S3 gateway
	// publishes to dlc.<workspace>.s3.events).
	Subject string `json:"subject,omitempty" jsonschema:"maxLength=255,pattern=^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$"`
	// Events, instead of Subject, has the trigger listen to OpenDLC's own status events
	// of its workspace (job, experiment, trial, pipeline and schedule events) that its
	// match selects, as a notification rule's match does.
	Events *TriggerEventSource `json:"events,omitempty"`
	// Webhook, instead of Subject, gives the trigger an HTTP endpoint,
	// POST /v1/workspaces/<workspace>/triggers/<name>/webhook, whose requests are
	// authenticated by an HMAC-SHA256 signature (docs/triggers.md); each accepted body
	// becomes an event on dlc.<workspace>.trigger.<name>, where the trigger listens.
	Webhook *TriggerWebhook `json:"webhook,omitempty"`
	// Filter must all hold for an event to start the action; empty passes every event.
	Filter []EventFilter `json:"filter,omitempty" jsonschema:"maxItems=16"`
	// Params are the action's parameters: name → template, where ${event.<path>} is a
	// field of the event, such as ${event.data.Records[0].s3.object.key}.
	Params map[string]string `json:"params,omitempty"`
	// Action is what the trigger starts.
	Action TriggerAction `json:"action"`
	// Debounce gathers events: the first event opens a window of this length, and the
	// events of the window (at most 100, and as many as ${params.events} holds) start
	// one run, whose params are the last event's, with ${params.eventCount} and
	// ${params.events} (the JSON list of every event's params) besides. At most 1h.
	Debounce Duration `json:"debounce,omitempty"`
	// RateLimit bounds how many runs the trigger starts per period.
	RateLimit *TriggerRateLimit `json:"rateLimit,omitempty"`
	// MaxConcurrentRuns bounds how many runs the trigger started may run at once; 0
	// (unset) does not bound them.
	MaxConcurrentRuns int32 `json:"maxConcurrentRuns,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// Overflow is what happens to a run that rateLimit or maxConcurrentRuns do not let
	// start when its events arrive: queue (the default) starts it once they do, drop
	// drops it.
	Overflow TriggerOverflow `json:"overflow,omitempty" jsonschema:"enum=queue,enum=drop"`
}

// TriggerRateLimit is at most Runs runs per Period.
type TriggerRateLimit struct {
	// Runs is how many runs may start within any Period.
	Runs int32 `json:"runs" jsonschema:"minimum=1,maximum=1000"`
	// Period is the window, from 1s to 24h.
	Period Duration `json:"period"`
}

// TriggerOverflow is what happens to a run a trigger's limits hold back.
type TriggerOverflow string

// Overflow policies.
const (
	// OverflowQueue starts the run once the limits let it.
	OverflowQueue TriggerOverflow = "queue"
	// OverflowDrop drops the run.
	OverflowDrop TriggerOverflow = "drop"
)

// Implicit params of a debounced trigger's run.
const (
	// ParamEventCount is the number of events a debounced run starts for.
	ParamEventCount = "eventCount"
	// ParamEvents is the JSON list of the data of the events a debounced run starts for.
	ParamEvents = "events"
)

// HasControls reports whether the trigger's runs go through its gate: it sets a
// debounce, a rate limit or a concurrency bound.
func (s *TriggerSpec) HasControls() bool {
	return s.Debounce.D() > 0 || s.RateLimit != nil || s.MaxConcurrentRuns > 0
}

// TriggerEventSource selects OpenDLC's own events of the trigger's workspace.
type TriggerEventSource struct {
	// Match selects the events, as a notification rule's match does; empty selects
	// every status event of the workspace.
	Match NotificationMatch `json:"match,omitempty,omitzero"`
}

// TriggerWebhook is a trigger's HTTP endpoint. Exactly one of Secret and SecretRef is
// set: the HMAC key the sender signs each request with.
type TriggerWebhook struct {
	// Secret is the HMAC key, stored with the trigger (answers of the API redact it);
	// prefer SecretRef.
	Secret string `json:"secret,omitempty" jsonschema:"minLength=16,maxLength=256"`
	// SecretRef names a secret of the workspace that the server resolves on each
	// request, so the key is not stored with the trigger.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// EventFilter tests one field of an event. Exactly one of Equals, Prefix and Exists is
// set. A field that is not a string is compared in its JSON form (3, true); a missing
// field fails Equals and Prefix.
type EventFilter struct {
	// Field is a path into the event, such as type or data.Records[0].s3.object.key.
	Field string `json:"field" jsonschema:"maxLength=256"`
	// Equals is the value the field must have.
	Equals string `json:"equals,omitempty" jsonschema:"maxLength=1024"`
	// Prefix is what the field's value must start with.
	Prefix string `json:"prefix,omitempty" jsonschema:"maxLength=1024"`
	// Exists says the field must be present (true) or absent (false): {field:
	// data.step, exists: false} selects a pipeline run's own events, not its steps'.
	Exists *bool `json:"exists,omitempty"`
}

// TriggerAction is what a trigger starts: exactly one of Pipeline, Job and Experiment.
type TriggerAction struct {
	// Pipeline is a pipeline template; each event starts one run, named
	// <trigger>-<hash of the event id>, with the trigger's params as its parameters.
	Pipeline *PipelineSpec `json:"pipeline,omitempty"`
	// Job is a TrainingJob spec template; each event starts one job, named like a
	// pipeline run, with ${params.<name>} replaced by the trigger's params in its
	// command, args, env values, workingDir, checkpoint.uri and data URIs.
	Job *TrainingJobSpec `json:"job,omitempty"`
	// Experiment is an Experiment (HPO) spec template; each event starts one
	// experiment, named like a pipeline run, with ${params.<name>} of the trigger's
	// params replaced in its trial template (as in a job's); the references to the
	// search space's parameters stay for each trial (TriggerExperimentSpec).
	Experiment *ExperimentSpec `json:"experiment,omitempty"`
	// PipelineTemplateRef names a stored PipelineTemplate of the trigger's workspace
	// instead of embedding a pipeline: each event starts one run of it, as the template
	// is at that moment, named like a pipeline's run, with the trigger's params as its
	// parameters (refused, and logged, when the template does not take them).
	PipelineTemplateRef *PipelineTemplateRef `json:"pipelineTemplateRef,omitempty"`
}

var _ Object = (*Trigger)(nil)

// GetKind returns KindTrigger.
func (t *Trigger) GetKind() Kind { return KindTrigger }

// GetMeta returns the trigger's metadata.
func (t *Trigger) GetMeta() *ObjectMeta { return &t.Metadata }

// Default fills in the workspace.
func (t *Trigger) Default() {
	if t.Metadata.Workspace == "" {
		t.Metadata.Workspace = DefaultWorkspace
	}
}

// ListenSubject is the inbound subject the trigger listens on: its Subject, or for a
// webhook trigger TriggerInboundSubject of its workspace and name, where the webhook
// publishes; empty for a trigger on OpenDLC's own events.
func (t *Trigger) ListenSubject() string {
	switch {
	case t.Spec.Subject != "":
		return t.Spec.Subject
	case t.Spec.Webhook != nil:
		ws := t.Metadata.Workspace
		if ws == "" {
			ws = DefaultWorkspace
		}
		return TriggerSubjectPrefix(ws) + t.Metadata.Name
	}
	return ""
}

// TriggerSubjectPrefix is the prefix of the subjects programs publish a workspace's
// trigger events on: dlc.<workspace>.trigger.<name>.
func TriggerSubjectPrefix(workspace string) string { return "dlc." + workspace + ".trigger." }

// S3SubjectPrefix is the prefix of the subjects that carry a workspace's S3 bucket
// notifications: dlc.<workspace>.s3.<name>.
func S3SubjectPrefix(workspace string) string { return "dlc." + workspace + ".s3." }

// S3EventSubject is the subject the dev stack's S3 gateway publishes a workspace's bucket
// notifications on.
func S3EventSubject(workspace string) string { return S3SubjectPrefix(workspace) + "events" }

// S3RawEventSubject is where the dev stack's S3 gateway publishes every bucket
// notification: outside every workspace's subjects (no reader may subscribe to it), kept
// by DLC_INBOUND, and routed by the trigger process to the owning workspace's
// S3EventSubject (triggers.StartS3Router).
const S3RawEventSubject = "_dlc.s3.events"

// runHashLength is how many hex digits of the event id's hash name a trigger's run.
const runHashLength = 10

// TriggerRunName is the name of what a trigger starts for an event: the trigger's name
// and a hash of the event's id, so that an event delivered twice names the same run.
func TriggerRunName(trigger, eventID string) string {
	h := sha256.Sum256([]byte(eventID))
	return trigger + "-" + hex.EncodeToString(h[:])[:runHashLength]
}

// Matches reports whether the event (the envelope, decoded by encoding/json into generic
// values) passes every filter. Fields that do not parse never match; Validate reports
// them.
func (s *TriggerSpec) Matches(event any) bool {
	for _, f := range s.Filter {
		p, err := ParseFieldPath(f.Field)
		if err != nil {
			return false
		}
		v, ok := p.Lookup(event)
		if f.Exists != nil {
			if ok != *f.Exists {
				return false
			}
			continue
		}
		if !ok {
			return false
		}
		got := FieldString(v)
		if f.Prefix != "" && !strings.HasPrefix(got, f.Prefix) {
			return false
		}
		if f.Prefix == "" && got != f.Equals {
			return false
		}
	}
	return true
}

// ResolveParams evaluates the trigger's params for an event: every ${event.<path>} is
// replaced by the field's value. A missing field is an error, and so is a value that
// CheckTemplateValue refuses (a NUL byte, too long).
func (s *TriggerSpec) ResolveParams(event any) (map[string]string, error) {
	out := make(map[string]string, len(s.Params))
	for _, k := range sortedKeys(s.Params) {
		v, err := ExpandTemplate(s.Params[k], func(r TemplateRef) (string, error) {
			if r.Root != RefEvent {
				return "", fmt.Errorf("%s: only ${event.<path>} can be used in a trigger's params", r)
			}
			x, ok := r.Path.Lookup(event)
			if !ok {
				return "", fmt.Errorf("%s: the event has no field %s", r, r.Path)
			}
			return FieldString(x), nil
		})
		if err == nil {
			err = CheckTemplateValue("params."+k, v)
		}
		if err != nil {
			return nil, fmt.Errorf("params.%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// FieldString is the text of an event field: a string as it is, anything else in its
// JSON form.
func FieldString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// JSONSchemaExtend pins apiVersion and kind.
func (Trigger) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindTrigger)
}

// JSONSchemaExtend bounds the params and says that exactly one source is set.
func (TriggerSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"subject"}},
		{Required: []string{"events"}},
		{Required: []string{"webhook"}},
	}
	if p, ok := s.Properties.Get("params"); ok {
		p.MaxProperties = uint64p(maxTriggerParams)
		p.PropertyNames = &jsonschema.Schema{Type: "string", MaxLength: uint64p(64), Pattern: envNamePattern}
		p.AdditionalProperties = &jsonschema.Schema{Type: "string", MaxLength: uint64p(maxTriggerParamLength)}
	}
}

// JSONSchemaExtend says that exactly one of secret and secretRef is set.
func (TriggerWebhook) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"secret"}},
		{Required: []string{"secretRef"}},
	}
}

// JSONSchemaExtend says that exactly one of equals, prefix and exists is set.
func (EventFilter) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"equals"}},
		{Required: []string{"prefix"}},
		{Required: []string{"exists"}},
	}
}

// JSONSchemaExtend says that exactly one of pipeline, job and experiment is set.
func (TriggerAction) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"pipeline"}},
		{Required: []string{"job"}},
		{Required: []string{"experiment"}},
		{Required: []string{"pipelineTemplateRef"}},
	}
}

// DecodeTrigger is Decode for a document that must be a Trigger.
func DecodeTrigger(data []byte) (*Trigger, error) {
	return decodeAs[Trigger](data, KindTrigger)
}
