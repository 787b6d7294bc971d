package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// validateDocs is a valid document of every kind, in workspace alpha, named by %s.
var validateDocs = map[schemas.Kind]string{
	schemas.KindTrainingJob: `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: alpha}
spec: {framework: custom, command: ["true"], roles: {worker: {replicas: 1}}}
`,
	schemas.KindExperiment: `
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: alpha}
spec:
  searchSpace: [{name: lr, type: float, min: 0.001, max: 0.1}]
  objective: {metric: accuracy, direction: maximize}
  maxTrials: 4
  trialTemplate: {framework: custom, command: [train, "${params.lr}"], roles: {worker: {replicas: 1}}}
`,
	schemas.KindSchedule: `
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: %s, workspace: alpha}
spec:
  cron: "@daily"
  action:
    pipelineTemplate:
      params: {threshold: "0.9"}
      spec:
        params: [{name: threshold}]
        steps: [{name: eval, job: {framework: custom, command: [eval, "${params.threshold}"], roles: {worker: {replicas: 1}}}}]
`,
	schemas.KindPipelineTemplate: `
apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: %s, workspace: alpha}
spec:
  params: [{name: threshold, default: "0.9"}]
  steps: [{name: eval, job: {framework: custom, command: [eval, "${params.threshold}"], roles: {worker: {replicas: 1}}}}]
`,
	schemas.KindPipeline: `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: %s, workspace: alpha}
spec:
  steps: [{name: eval, job: {framework: custom, command: ["true"], roles: {worker: {replicas: 1}}}}]
`,
	schemas.KindTrigger: `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: %s, workspace: alpha}
spec:
  subject: dlc.alpha.trigger.data
  action: {job: {framework: custom, command: ["true"], roles: {worker: {replicas: 1}}}}
`,
	schemas.KindNotificationRule: `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: %s, workspace: alpha}
spec:
  match: {types: [opendlc.job.phase.v1]}
  subject: dlc.alpha.notify.r1
`,
}

// POST /v1/validate takes a document of every kind: a valid one answers 200 {valid:
// true}, an invalid one 422 with every problem's field path, as the route that creates
// that kind would; nothing reaches Temporal.
func TestValidateRouteTakesEveryKind(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	viewer := authn.token(t, "alpha-viewer", "alpha", api.RoleViewer)
	h := testServer(tc, authn).Handler()

	type want struct {
		status int
		fields []string
	}
	tests := map[string]struct {
		body string
		want want
	}{
		"unknown kind": {body: "apiVersion: opendlc.io/v1alpha1\nkind: Model\nmetadata: {name: m}\n",
			want: want{http.StatusUnprocessableEntity, []string{"kind"}}},
		"not a document": {body: "- just\n- a list\n", want: want{status: http.StatusBadRequest}},
		"schedule template problems": {
			body: strings.NewReplacer(`threshold: "0.9"`, `thresold: "0.9"`, "replicas: 1", "replicas: 0").
				Replace(fmt.Sprintf(validateDocs[schemas.KindSchedule], "nightly")),
			want: want{http.StatusUnprocessableEntity, []string{
				"spec.action.pipelineTemplate.params.threshold",
				"spec.action.pipelineTemplate.params.thresold",
				"spec.action.pipelineTemplate.spec.steps[0].job.roles.worker.replicas",
			}}},
		"unknown field of an experiment": {
			body: strings.Replace(fmt.Sprintf(validateDocs[schemas.KindExperiment], "tune"), "maxTrials", "maxTrial", 1),
			want: want{http.StatusUnprocessableEntity, []string{"spec.maxTrial"}}},
	}
	for _, k := range schemas.Kinds() {
		doc, ok := validateDocs[k]
		if !ok {
			t.Fatalf("no test document of kind %s", k)
		}
		tests["valid "+string(k)] = struct {
			body string
			want want
		}{body: fmt.Sprintf(doc, "good-name"), want: want{status: http.StatusOK}}
		tests["invalid "+string(k)] = struct {
			body string
			want want
		}{body: fmt.Sprintf(doc, "Bad_Name"), want: want{http.StatusUnprocessableEntity, []string{"metadata.name"}}}
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rec := call(h, "POST", "/v1/validate", viewer, []byte(tt.body))
			got := want{status: rec.Code}
			switch rec.Code {
			case http.StatusOK:
				var res api.ValidateResult
				if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || !res.Valid {
					t.Errorf("answer %s: want {valid: true}", rec.Body)
				}
			default:
				var eb api.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != api.CodeInvalidSpec {
					t.Errorf("answer %s: want an InvalidSpec error", rec.Body)
				}
				if rec.Code == http.StatusUnprocessableEntity {
					for _, d := range eb.Error.Details {
						got.fields = append(got.fields, d.Field)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("answer (-want +got):\n%s\nbody: %s", diff, rec.Body)
			}
		})
	}
	if n := tc.starts(); n != 0 {
		t.Errorf("validate started %d workflows", n)
	}
}
