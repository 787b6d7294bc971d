package console

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// firedSince is how far back a trigger's page looks for what it started.
const firedSince = 24 * time.Hour

// sampleTrigger and sampleRule start the apply forms.
const (
	sampleTrigger = `apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-upload, workspace: %s}
spec:
  subject: dlc.%s.trigger.on-upload
  params: {key: "${event.data.key}"}
  action:
    job:
      framework: custom
      command: [sh, -c, "echo new data ${params.key}"]
      roles: {worker: {replicas: 1}}
`
	sampleRule = `apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: failures, workspace: %s}
spec:
  match: {phases: [Failed]}
  subject: dlc.%s.notify.failures
`
)

// triggersData is the triggers and rules list pages'.
type triggersData struct {
	Triggers []schemas.Trigger
	Rules    []schemas.NotificationRule
	Form     docForm
}

// triggerPages are the triggers' list, apply and delete pages.
var triggerPages = &docPages[schemas.Trigger]{
	dir: "triggers", kind: "Trigger", id: "trigger", title: "Triggers", sample: sampleTrigger,
	list: func(c *client.Client, ctx context.Context, ws string) ([]schemas.Trigger, error) {
		l, err := c.ListTriggers(ctx, ws)
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	},
	apply: (*client.Client).ApplyTrigger,
	del:   (*client.Client).DeleteTrigger,
	name:  func(t schemas.Trigger) string { return t.Metadata.Name },
	data:  func(ts []schemas.Trigger, f docForm) any { return triggersData{Triggers: ts, Form: f} },
}

// rulePages are the notification rules' list, apply and delete pages (secrets redacted
// by the API).
var rulePages = &docPages[schemas.NotificationRule]{
	dir: "rules", kind: "NotificationRule", id: "rule", title: "Notification rules", sample: sampleRule,
	list: func(c *client.Client, ctx context.Context, ws string) ([]schemas.NotificationRule, error) {
		l, err := c.ListRules(ctx, ws)
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	},
	apply: (*client.Client).ApplyRule,
	del:   (*client.Client).DeleteRule,
	name:  func(r schemas.NotificationRule) string { return r.Metadata.Name },
	data:  func(rs []schemas.NotificationRule, f docForm) any { return triggersData{Rules: rs, Form: f} },
}

// firedRun is one thing a trigger started.
type firedRun struct {
	Time time.Time
	events.TriggerFiredData
}

// triggerPage shows a trigger: its subject, filters, parameters, action and spec, and
// what it started in the last day (its trigger-fired events).
func (c *Console) triggerPage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	t, err := k.api.GetTrigger(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	spec, err := yaml.Marshal(t)
	if err != nil {
		return err
	}
	var fired []firedRun
	err = k.api.Events(r.Context(), k.ws, client.EventOptions{Type: events.TypeTriggerFired, Since: firedSince}, func(ev events.Event) error {
		var d events.TriggerFiredData
		if json.Unmarshal(ev.Data, &d) == nil && d.Trigger == name {
			fired = append(fired, firedRun{Time: ev.Time, TriggerFiredData: d})
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Reverse(fired)
	action := "job"
	if t.Spec.Action.Pipeline != nil {
		action = "pipeline"
	}
	return c.render(w, http.StatusOK, "trigger", "", k.page("Trigger "+name, "triggers", struct {
		Trigger  *schemas.Trigger
		Action   string
		SpecYAML string
		Fired    []firedRun
	}{t, action, string(spec), fired}))
}

// rulePage shows a notification rule: what it matches, where it delivers and how,
// and its document (secrets redacted by the API).
func (c *Console) rulePage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	rule, err := k.api.GetRule(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	spec, err := yaml.Marshal(rule)
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "rule", "", k.page("Notification rule "+name, "rules", struct {
		Rule     *schemas.NotificationRule
		SpecYAML string
	}{rule, string(spec)}))
}
