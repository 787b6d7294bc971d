package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// A trigger that names a stored PipelineTemplate (spec.action.pipelineTemplateRef)
// on the real stack: an event starts one run of the template as it is then, with the
// trigger's params as its parameters and the trigger's label; the run's job prints the
// parameter taken from the event. A trigger naming the template and a pipeline at once
// is refused, naming the field.
func TestTriggerRunsAStoredPipelineTemplate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	if _, err := c.ApplyPipelineTemplate(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: retrain, workspace: %s}
spec:
  params: [{name: key}]
  steps:
    - name: prepare
      job: {framework: custom, command: [sh, -c, 'echo "key=$0"', "${params.key}"], roles: {worker: {replicas: 1}}}
`, ws)); err != nil {
		t.Fatal(err)
	}
	trigger := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-data, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.on-data
  params: {key: "${event.data.key}"}
  action:
    pipelineTemplateRef: {name: retrain}
`, ws)
	both := strings.Replace(trigger, "pipelineTemplateRef: {name: retrain}",
		"pipelineTemplateRef: {name: retrain}\n    job: {framework: custom, command: [x], roles: {worker: {replicas: 1}}}", 1)
	var apiErr *dlc.Error
	if _, err := c.ApplyTrigger(ctx, []byte(both)); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(apiErr.Error(), "spec.action") {
		t.Fatalf("a trigger with a template and a job: %v, want 422 on spec.action", err)
	}
	if _, err := c.ApplyTrigger(ctx, []byte(trigger)); err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "tpl-1", "source": "/etl", "type": "com.example.done",
		"datacontenttype": "application/json", "data": map[string]string{"key": "clicks/2026-12-07.csv"}})
	if _, err := env.events.JetStream().Publish(ctx, "dlc."+ws+".trigger.on-data", ev); err != nil {
		t.Fatal(err)
	}
	run := schemas.TriggerRunName("on-data", "/etl tpl-1") // an event is named by its source and id
	p := waitPipeline(t, ctx, ws, run)
	if p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run %s: %s (%s), want Succeeded", run, p.Status.Phase, p.Status.Message)
	}
	meta := p.Spec.Metadata
	if meta.Annotations[schemas.AnnotationPipelineTemplate] != "retrain" || meta.Labels[schemas.LabelTrigger] != "on-data" ||
		p.Status.Params["key"] != "clicks/2026-12-07.csv" {
		t.Errorf("run %s: metadata %+v, params %v; want template retrain, trigger on-data, key from the event", run, meta, p.Status.Params)
	}
	found := false
	for _, r := range jobLogs(t, ctx, ws, run+"-prepare") {
		found = found || r.Line == "key=clicks/2026-12-07.csv"
	}
	if !found {
		t.Errorf("%s-prepare did not print the event's key", run)
	}
}
