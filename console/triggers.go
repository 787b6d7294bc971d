package console

import (
	"cmp"
	"encoding/json"
	"fmt"
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

func triggerForm(ws, spec string) docForm {
	return docForm{Action: wsPath(ws, "triggers"), Kind: "Trigger", Button: "Apply", ID: "trigger", Spec: spec}
}

func ruleForm(ws, spec string) docForm {
	return docForm{Action: wsPath(ws, "rules"), Kind: "NotificationRule", Button: "Apply", ID: "rule", Spec: spec}
}

// triggersPage lists the workspace's triggers, with a form that applies one.
func (c *Console) triggersPage(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.showTriggers(w, r, k, http.StatusOK, triggerForm(k.ws, fmt.Sprintf(sampleTrigger, k.ws, k.ws)))
}

func (c *Console) showTriggers(w http.ResponseWriter, r *http.Request, k *call, status int, f docForm) error {
	list, err := k.api.ListTriggers(r.Context(), k.ws)
	if err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b schemas.Trigger) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	return c.render(w, status, "triggers", "", k.page("Triggers", "triggers", triggersData{Triggers: list.Items, Form: f}))
}

// applyTrigger creates or replaces a trigger from the form's document, then shows it;
// a document the API refuses shows the list again with the API's answer.
func (c *Console) applyTrigger(w http.ResponseWriter, r *http.Request, k *call) error {
	return applyDoc(w, r, k, docApply[schemas.Trigger]{
		send: k.api.ApplyTrigger, form: triggerForm, dir: "triggers",
		name:  func(t *schemas.Trigger) string { return t.Metadata.Name },
		again: func(f docForm) error { return c.showTriggers(w, r, k, f.Status, f) },
	})
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

// deleteTrigger deletes a trigger, then shows the list.
func (c *Console) deleteTrigger(w http.ResponseWriter, r *http.Request, k *call) error {
	if err := k.api.DeleteTrigger(r.Context(), k.ws, r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "triggers"), http.StatusSeeOther)
	return nil
}

// rulesPage lists the workspace's notification rules (secrets redacted by the API),
// with a form that applies one.
func (c *Console) rulesPage(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.showRules(w, r, k, http.StatusOK, ruleForm(k.ws, fmt.Sprintf(sampleRule, k.ws, k.ws)))
}

func (c *Console) showRules(w http.ResponseWriter, r *http.Request, k *call, status int, f docForm) error {
	list, err := k.api.ListRules(r.Context(), k.ws)
	if err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b schemas.NotificationRule) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	return c.render(w, status, "rules", "", k.page("Notification rules", "rules", triggersData{Rules: list.Items, Form: f}))
}

// applyRule creates or replaces a notification rule from the form's document.
func (c *Console) applyRule(w http.ResponseWriter, r *http.Request, k *call) error {
	return applyDoc(w, r, k, docApply[schemas.NotificationRule]{
		send: k.api.ApplyRule, form: ruleForm, dir: "rules",
		name:  func(rule *schemas.NotificationRule) string { return rule.Metadata.Name },
		again: func(f docForm) error { return c.showRules(w, r, k, f.Status, f) },
	})
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

// deleteRule deletes a notification rule, then shows the list.
func (c *Console) deleteRule(w http.ResponseWriter, r *http.Request, k *call) error {
	if err := k.api.DeleteRule(r.Context(), k.ws, r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "rules"), http.StatusSeeOther)
	return nil
}
