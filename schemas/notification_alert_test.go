package schemas_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

// alertRuleOf returns a valid rule with alert a: every job labelled team=cv.
func alertRuleOf(a schemas.NotificationAlert, mutate ...func(r *schemas.NotificationRule)) *schemas.NotificationRule {
	return rule(append([]func(r *schemas.NotificationRule){func(r *schemas.NotificationRule) {
		r.Spec.Match = schemas.NotificationMatch{Labels: map[string]string{"team": "cv"}, Jobs: []string{"resnet"}}
		r.Spec.Alert = &a
	}}, mutate...)...)
}

func TestNotificationAlertValidate(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	d := func(v time.Duration) schemas.Duration { return schemas.Duration(v) }
	window := "must be between 1s and 24h0m0s"
	tests := map[string]ruleCase{
		"below for":  {rule: alertRuleOf(schemas.NotificationAlert{Metric: "gpu.utilization", Below: f(10), For: d(15 * time.Minute)})},
		"above for":  {rule: alertRuleOf(schemas.NotificationAlert{Metric: "memory", Above: f(90), For: d(time.Second)})},
		"absent":     {rule: alertRuleOf(schemas.NotificationAlert{Metric: "train/loss", AbsentFor: d(24 * time.Hour)})},
		"zero below": {rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Below: f(0), For: d(time.Minute)})},
		"none": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu"}),
			want: schemas.ErrorList{{Field: "spec.alert", Detail: "must set exactly one of above, below and absentFor"}},
		},
		"above and below": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Above: f(1), Below: f(2), For: d(time.Minute)}),
			want: schemas.ErrorList{{Field: "spec.alert", Detail: "must set exactly one of above, below and absentFor"}},
		},
		"below and absentFor": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Below: f(2), AbsentFor: d(time.Minute)}),
			want: schemas.ErrorList{{Field: "spec.alert", Detail: "must set exactly one of above, below and absentFor"}},
		},
		"no for": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Below: f(2)}),
			want: schemas.ErrorList{{Field: "spec.alert.for", Detail: "required"}},
		},
		"for too short": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Below: f(2), For: d(500 * time.Millisecond)}),
			want: schemas.ErrorList{{Field: "spec.alert.for", Detail: window}},
		},
		"for too long": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Above: f(2), For: d(25 * time.Hour)}),
			want: schemas.ErrorList{{Field: "spec.alert.for", Detail: window}},
		},
		"absentFor too short, with for": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "loss", AbsentFor: d(time.Millisecond), For: d(time.Minute)}),
			want: schemas.ErrorList{
				{Field: "spec.alert.absentFor", Detail: window},
				{Field: "spec.alert.for", Detail: "must not be set with absentFor"},
			},
		},
		"metric": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "gpu util", Below: f(2), For: d(time.Minute)}),
			want: schemas.ErrorList{{Field: "spec.alert.metric", Detail: "must be a metric name: letters, digits, '_', '.', ':', '/' and '-'"}},
		},
		"no metric": {
			rule: alertRuleOf(schemas.NotificationAlert{Below: f(2), For: d(time.Minute)}),
			want: schemas.ErrorList{{Field: "spec.alert.metric", Detail: "required"}},
		},
		"not finite": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Above: f(math.Inf(1)), For: d(time.Minute)}),
			want: schemas.ErrorList{{Field: "spec.alert.above", Detail: "must be a finite number"}},
		},
		"event criteria": {
			rule: alertRuleOf(schemas.NotificationAlert{Metric: "cpu", Above: f(1), For: d(time.Minute)}, func(r *schemas.NotificationRule) {
				r.Spec.Match.Types = []string{"opendlc.job.phase.v1"}
				r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobRunning}
			}),
			want: schemas.ErrorList{
				{Field: "spec.match.phases", Detail: "must not be set with alert: an alert's match selects jobs by jobs and labels"},
				{Field: "spec.match.types", Detail: "must not be set with alert: an alert's match selects jobs by jobs and labels"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tt.rule, tt.want)
		})
	}
}

// The YAML of docs/alerts.md decodes to the alert it shows.
func TestDecodeNotificationAlert(t *testing.T) {
	r, err := schemas.DecodeNotificationRule([]byte(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: idle-gpu, workspace: vision}
spec:
  match: {labels: {team: cv}}
  alert: {metric: gpu.utilization, below: 10, for: 15m}
  webhook: {url: "https://hooks.example.com/x", secret: "at-least-16-characters", format: slack}
`))
	if err != nil {
		t.Fatal(err)
	}
	ten := 10.0
	want := &schemas.NotificationAlert{Metric: "gpu.utilization", Below: &ten, For: schemas.Duration(15 * time.Minute)}
	if diff := cmp.Diff(want, r.Spec.Alert); diff != "" {
		t.Errorf("alert (-want +got):\n%s", diff)
	}
	if errs := r.Validate(); errs != nil {
		t.Errorf("Validate: %v", errs)
	}
	r, err = schemas.DecodeNotificationRule([]byte(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: idle-gpu, workspace: vision}
spec:
  alert: {metric: gpu.utilization, below: 10, for: 100ms}
  webhook: {url: "https://hooks.example.com/x", secret: "at-least-16-characters"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want2 := schemas.ErrorList{{Field: "spec.alert.for", Detail: "must be between 1s and 24h0m0s"}}
	if diff := cmp.Diff(want2.Error(), r.Validate().Error()); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}
