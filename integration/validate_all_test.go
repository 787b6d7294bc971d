package integration

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/workflows"
)

// mixedMistakesJob has values of the wrong type (a bad quantity, a bad duration, a string
// for a number, an unknown field) and semantic mistakes (a bad name, an unknown
// framework, replicas 0, a checkpoint URI that is not s3://).
const mixedMistakesJob = `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: Mixed_Mistakes}
spec:
  framework: pytorh
  command: [sleep, "1"]
  roles:
    worker: {replicas: 0, resources: {memory: 1Gx}}
    master: {replicas: one}
  checkpoint: {uri: "gs://ckpt/x"}
  timeout: 10 minutes
  tiemout: 1h
`

var mixedMistakesFields = []string{"metadata.name", "spec.checkpoint.uri", "spec.framework",
	"spec.roles.master.replicas", "spec.roles.worker.replicas", "spec.roles.worker.resources.memory",
	"spec.tiemout", "spec.timeout"}

// The API refuses a spec with type and semantic mistakes with one 422 that lists all of
// them, each with its field path, on job submission and on /v1/validate, for a job and
// for a schedule; nothing is created.
func TestAPIReportsEveryValidationError(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	fieldsOf := func(what string, err error) []string {
		t.Helper()
		var apiErr *dlc.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: error = %v, want an API error", what, err)
		}
		if apiErr.Status != http.StatusUnprocessableEntity || apiErr.API.Code != api.CodeInvalidSpec {
			t.Errorf("%s: status %d code %s, want 422 InvalidSpec", what, apiErr.Status, apiErr.API.Code)
		}
		var fields []string
		for _, d := range apiErr.API.Details {
			if d.Detail == "" {
				t.Errorf("%s: %s has no message", what, d.Field)
			}
			fields = append(fields, d.Field)
		}
		t.Logf("%s: %v", what, apiErr.API.Details)
		return fields
	}

	job := []byte(strings.Replace(mixedMistakesJob, "{name: Mixed_Mistakes}", "{name: Mixed_Mistakes, workspace: "+ws+"}", 1))
	_, err := env.api.SubmitJob(ctx, job)
	if diff := cmp.Diff(mixedMistakesFields, fieldsOf("submit", err)); diff != "" {
		t.Errorf("submit: field paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mixedMistakesFields, fieldsOf("validate", env.api.Validate(ctx, job))); diff != "" {
		t.Errorf("validate: field paths (-want +got):\n%s", diff)
	}
	if _, err := env.temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(ws, "Mixed_Mistakes"), ""); err == nil {
		t.Error("a workflow exists for the refused job")
	}

	schedule := []byte(`apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: nightly, workspace: ` + ws + `}
spec:
  cron: "0 25 * * *"
  catchupWindow: half a day
  historyLimit: lots
  action:
    jobTemplate:
      spec:
        framework: custom
        command: [train]
        roles: {worker: {replicas: -1}}
`)
	want := []string{"spec.action.jobTemplate.spec.roles.worker.replicas", "spec.catchupWindow", "spec.cron", "spec.historyLimit"}
	if diff := cmp.Diff(want, fieldsOf("validate schedule", env.api.Validate(ctx, schedule))); diff != "" {
		t.Errorf("validate schedule: field paths (-want +got):\n%s", diff)
	}
	_, err = env.api.CreateSchedule(ctx, schedule)
	if diff := cmp.Diff(want, fieldsOf("create schedule", err)); diff != "" {
		t.Errorf("create schedule: field paths (-want +got):\n%s", diff)
	}
}
