package schemas_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

// onNewData starts the retrain pipeline for every object created under clicks/ in the
// workspace's S3 notifications.
const onNewData = `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-new-data, workspace: vision}
spec:
  subject: dlc.vision.s3.events
  filter:
    - {field: "data.Records[0].eventName", prefix: "s3:ObjectCreated:"}
    - {field: "data.Records[0].s3.object.key", prefix: clicks/}
  params:
    dataKey: "s3://${event.data.Records[0].s3.bucket.name}/${event.data.Records[0].s3.object.key}"
  action:
    pipeline:
      params: [{name: dataKey}, {name: currentAccuracy, default: "0.8"}]
      steps:
        - name: train
          job:
            framework: custom
            command: [sh, -c, 'echo training on $DATA']
            env: [{name: DATA, value: "${params.dataKey}"}]
            roles: {worker: {replicas: 1}}
`

// onDemand starts a job for every event a program publishes on the trigger's subject.
const onDemand = `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-demand, workspace: vision}
spec:
  subject: dlc.vision.trigger.retrain
  filter: [{field: type, equals: com.example.retrain}]
  params: {lr: "${event.data.lr}"}
  action:
    job:
      framework: custom
      command: [trainer, --lr, "${params.lr}"]
      roles: {worker: {replicas: 1}}
`

func decodeTrigger(t *testing.T, doc string) *schemas.Trigger {
	t.Helper()
	return decodeAs[*schemas.Trigger](t, doc)
}

func TestTriggerValid(t *testing.T) {
	docs := map[string]string{"pipeline": onNewData, "job": onDemand}
	for _, f := range []string{"on-training-succeeded.yaml", "on-webhook.yaml", "on-uploads-debounced.yaml"} {
		b, err := os.ReadFile("../examples/trigger/" + f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			checkValidDoc(t, doc, "DecodeTrigger", schemas.DecodeTrigger)
		})
	}
}

// triggerCase edits a valid trigger document and wants these errors from ValidateTrigger.
type triggerCase struct {
	doc  string
	edit func(tr *schemas.Trigger)
	want schemas.ErrorList
}

func TestTriggerInvalid(t *testing.T) {
	// subject sets spec.subject and wants one error on it.
	subject := func(doc, subject, detail string) triggerCase {
		return triggerCase{doc: doc, edit: func(tr *schemas.Trigger) { tr.Spec.Subject = subject },
			want: schemas.ErrorList{{Field: "spec.subject", Detail: detail}}}
	}
	const notOwn = "must be dlc.vision.trigger.<name> or dlc.vision.s3.<name> (one token after the prefix)"
	tests := map[string]triggerCase{
		"subject of another workspace": subject(onNewData, "dlc.other.s3.events", notOwn),
		"subject outside dlc":          subject(onDemand, "orders.created", notOwn),
		"subject with more tokens":     subject(onDemand, "dlc.vision.trigger.a.fired", notOwn),
		"wildcard subject":             subject(onDemand, "dlc.vision.trigger.*", "must be a NATS subject: tokens of letters, digits, '_' and '-' separated by '.', without wildcards"),
		"missing subject":              subject(onDemand, "", "required unless events or webhook is set: the trigger needs a source"),
		"two sources": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Events = &schemas.TriggerEventSource{}
				tr.Spec.Webhook = &schemas.TriggerWebhook{Secret: strings.Repeat("s", 16)}
			},
			want: schemas.ErrorList{{Field: "spec", Detail: "must set only one of subject, events and webhook"}},
		},
		"events match": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Subject = ""
				tr.Spec.Events = &schemas.TriggerEventSource{Match: schemas.NotificationMatch{
					Phases: []schemas.JobPhase{"Succeeded", "Succeeded"}, Labels: map[string]string{"bad key!": "x"}}}
			},
			want: schemas.ErrorList{
				{Field: `spec.events.match.labels["bad key!"]`, Detail: "key must be [prefix/]name, where name is at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"},
				{Field: "spec.events.match.phases[1]", Detail: `duplicate "Succeeded" (first at spec.events.match.phases[0])`},
			},
		},
		"webhook without secret": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Subject = ""
				tr.Spec.Webhook = &schemas.TriggerWebhook{}
			},
			want: schemas.ErrorList{{Field: "spec.webhook.secret", Detail: "required unless secretRef is set: every webhook request is signed"}},
		},
		"webhook secret short": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Subject = ""
				tr.Spec.Webhook = &schemas.TriggerWebhook{Secret: "short"}
			},
			want: schemas.ErrorList{{Field: "spec.webhook.secret", Detail: "must be at least 16 characters"}},
		},
		"webhook secret and ref": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Subject = ""
				tr.Spec.Webhook = &schemas.TriggerWebhook{Secret: strings.Repeat("s", 16), SecretRef: &schemas.SecretRef{Name: "k"}}
			},
			want: schemas.ErrorList{{Field: "spec.webhook.secretRef", Detail: "must not be set together with secret"}},
		},
		"filters": {
			doc: onNewData,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Filter = []schemas.EventFilter{{Field: "data..x", Equals: "a"}, {Field: "type"}, {Field: "type", Equals: "a", Prefix: "b"}}
			},
			want: schemas.ErrorList{
				{Field: "spec.filter[0].field", Detail: `invalid field path "data..x": expected a key at ".x"`},
				{Field: "spec.filter[1]", Detail: "must set equals, prefix or exists"},
				{Field: "spec.filter[2]", Detail: "must set only one of equals and prefix"},
			},
		},
		"params": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Params = map[string]string{"lr": "${params.x}", "1bad": "x", "path": "${event.data[}"}
			},
			want: schemas.ErrorList{
				{Field: "spec.params.1bad", Detail: "parameter name must be at most 64 letters, digits and '_', not starting with a digit"},
				{Field: "spec.params.lr", Detail: "${params.x}: only ${event.<path>} can be used in a trigger's params"},
				{Field: "spec.params.path", Detail: `${event.data[}: invalid field path "data[": unterminated [`},
			},
		},
		"no action": {
			doc:  onDemand,
			edit: func(tr *schemas.Trigger) { tr.Spec.Action.Job = nil },
			want: schemas.ErrorList{{Field: "spec.action", Detail: "must set pipeline, job or experiment"}},
		},
		"two actions": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Action.Pipeline = &schemas.PipelineSpec{Steps: []schemas.PipelineStep{{Name: "a", Job: tr.Spec.Action.Job}}}
			},
			want: schemas.ErrorList{{Field: "spec.action", Detail: "must set only one of pipeline, job and experiment"}},
		},
		"pipeline params the trigger does not give, or the pipeline does not have": {
			doc: onNewData,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Params = map[string]string{"date": "${event.time}"}
			},
			want: schemas.ErrorList{
				{Field: "spec.params", Detail: `must give the pipeline's parameter "dataKey", which has no default`},
				{Field: "spec.params.date", Detail: `the pipeline has no parameter "date"`},
			},
		},
		"invalid pipeline": {
			doc: onNewData,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Action.Pipeline.Steps[0].DependsOn = []string{"nope"}
			},
			want: schemas.ErrorList{{Field: "spec.action.pipeline.steps[0].dependsOn[0]", Detail: `unknown step "nope"`}},
		},
		"job refers to an unknown parameter": {
			doc: onDemand,
			edit: func(tr *schemas.Trigger) {
				tr.Spec.Action.Job.Args = []string{"${params.epochs}", "${steps.a.outputs.job}"}
			},
			want: schemas.ErrorList{
				{Field: "spec.action.job.args[0]", Detail: `${params.epochs}: no parameter "epochs" in spec.params`},
				{Field: "spec.action.job.args[1]", Detail: "${steps.a.outputs.job}: a trigger's job can refer only to ${params.<name>}"},
			},
		},
		"invalid job": {
			doc:  onDemand,
			edit: func(tr *schemas.Trigger) { tr.Spec.Action.Job.Framework = "caffe" },
			want: schemas.ErrorList{{Field: "spec.action.job.framework", Detail: "must be one of pytorch, deepspeed, megatron, tensorflow, mpi, xgboost, paddle, ray, slurm, preprocess, inference, custom"}},
		},
		"names too long": {
			doc:  onNewData,
			edit: func(tr *schemas.Trigger) { tr.Metadata.Name = strings.Repeat("t", 40) },
			want: schemas.ErrorList{
				{Field: "metadata.name", Detail: "must be at most 39 characters: what the trigger starts is named <name>-<10 hex digits>"},
				{Field: "spec.action.pipeline.steps[0].name", Detail: "the step's job name <pipeline>-train would be longer than 50 characters; shorten the pipeline's or the step's name"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := decodeTrigger(t, tc.doc)
			tc.edit(tr)
			checkValidate(t, tr, tc.want)
		})
	}
}

// s3Envelope is how a trigger sees an S3 bucket notification: the record wrapped in an
// envelope with a derived id.
func s3Envelope(t *testing.T, key string) any {
	t.Helper()
	raw := `{"id": "s3:datasets/` + key + `:etag:1", "subject": "dlc.vision.s3.events", "data": {"Records": [{
		"eventName": "s3:ObjectCreated:Put",
		"s3": {"bucket": {"name": "datasets"}, "object": {"key": "` + key + `", "size": 42}}}]}}`
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTriggerMatchesAndParams(t *testing.T) {
	tr := decodeTrigger(t, onNewData)
	tests := map[string]struct {
		event      any
		match      bool
		wantParams map[string]string
	}{
		"object under the prefix": {
			event: s3Envelope(t, "clicks/2026-12-01.csv"), match: true,
			wantParams: map[string]string{"dataKey": "s3://datasets/clicks/2026-12-01.csv"},
		},
		"object elsewhere": {event: s3Envelope(t, "views/2026-12-01.csv")},
		"not an S3 record": {event: map[string]any{"id": "x", "data": map[string]any{"Service": "S3", "Event": "s3:TestEvent"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tr.Spec.Matches(tc.event); got != tc.match {
				t.Fatalf("Matches = %v, want %v", got, tc.match)
			}
			if !tc.match {
				return
			}
			got, err := tr.Spec.ResolveParams(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantParams, got); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}

	// A number compares in its JSON form; a missing field is an error in params.
	spec := schemas.TriggerSpec{
		Filter: []schemas.EventFilter{{Field: "data.Records[0].s3.object.size", Equals: "42"}},
		Params: map[string]string{"etag": "${event.data.Records[0].s3.object.eTag}"},
	}
	ev := s3Envelope(t, "clicks/a")
	if !spec.Matches(ev) {
		t.Error("size 42 does not match equals \"42\"")
	}
	if _, err := spec.ResolveParams(ev); err == nil || err.Error() !=
		"params.etag: ${event.data.Records[0].s3.object.eTag}: the event has no field data.Records[0].s3.object.eTag" {
		t.Errorf("ResolveParams error = %v", err)
	}
}

func TestTriggerRunName(t *testing.T) {
	a := schemas.TriggerRunName("on-new-data", "event-1")
	if a != schemas.TriggerRunName("on-new-data", "event-1") {
		t.Error("the run name of one event changes")
	}
	if a == schemas.TriggerRunName("on-new-data", "event-2") {
		t.Error("two events get the same run name")
	}
	if !strings.HasPrefix(a, "on-new-data-") || len(a) != len("on-new-data-")+10 {
		t.Errorf("run name %q: want on-new-data-<10 hex digits>", a)
	}
	if got := schemas.S3EventSubject("vision"); got != "dlc.vision.s3.events" {
		t.Errorf("S3EventSubject = %q", got)
	}
}

// A debounced trigger's run gets eventCount and events: a job may refer to them and a
// pipeline may declare them; without a debounce they are ordinary, missing params.
func TestTriggerDebounceParams(t *testing.T) {
	job := strings.Replace(onDemand, `command: [trainer, --lr, "${params.lr}"]`, `command: [trainer, --lr, "${params.lr}", --files, "${params.events}", --n, "${params.eventCount}"]`, 1)
	pipeline := strings.Replace(onNewData, `{name: currentAccuracy, default: "0.8"}]`, `{name: currentAccuracy, default: "0.8"}, {name: events}, {name: eventCount}]`, 1)
	for name, tc := range map[string]struct {
		doc, controls string
		want          []string
	}{
		"job, debounced":      {job, "debounce: 30s", nil},
		"pipeline, debounced": {pipeline, "debounce: 30s", nil},
		"job":                 {job, "", []string{"spec.action.job.command[4]", "spec.action.job.command[6]"}},
		"pipeline":            {pipeline, "", []string{"spec.params", "spec.params"}},
		"bad controls": {onDemand, "debounce: 2h\n  rateLimit: {runs: 0, period: 25h}\n  overflow: drop\n  maxConcurrentRuns: 1001",
			[]string{"spec.debounce", "spec.maxConcurrentRuns", "spec.rateLimit.period", "spec.rateLimit.runs"}},
		"overflow alone":       {onDemand, "overflow: queue", []string{"spec.overflow"}},
		"events param shadows": {strings.Replace(onDemand, `params: {lr: "${event.data.lr}"}`, `params: {lr: "${event.data.lr}", events: "${event.id}"}`, 1), "debounce: 30s", []string{"spec.params.events"}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := tc.doc
			if tc.controls != "" {
				doc = strings.Replace(doc, "  action:", "  "+tc.controls+"\n  action:", 1)
			}
			tr, err := schemas.DecodeValid([]byte(doc), schemas.DecodeTrigger)
			var got []string
			if list, ok := errors.AsType[schemas.ErrorList](err); ok {
				for _, e := range list {
					got = append(got, e.Field)
				}
			} else if err != nil {
				t.Fatalf("%v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fields at fault (-want +got):\n%s\n%v", diff, err)
			}
			if err == nil && tc.controls != "" && !tr.Spec.HasControls() {
				t.Error("a debounced trigger has no controls")
			}
		})
	}
}
