package schemas_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// TestDecodeValidReportsEveryProblem checks, for every kind, that a document with values
// of the wrong type (a bad quantity, a bad duration, a string for a number, an unknown
// field) and semantic mistakes gets all of them in one ErrorList, each at its field path,
// and no "required" noise for the fields whose value was of the wrong type.
func TestDecodeValidReportsEveryProblem(t *testing.T) {
	for _, tc := range everyProblemCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schemas.DecodeValid([]byte(tc.doc), schemas.Decode)
			list, ok := errors.AsType[schemas.ErrorList](err)
			if !ok {
				t.Fatalf("DecodeValid: got %T %v, want an ErrorList", err, err)
			}
			t.Logf("%s:\n%v", tc.name, list)
			if got := list.Fields(); !slices.Equal(got, tc.want) {
				t.Errorf("fields:\n got %q\nwant %q", got, tc.want)
			}
			for _, fe := range list {
				if fe.Detail == "" {
					t.Errorf("%s: empty message", fe.Field)
				}
			}
		})
	}
}

// TestDecodeValidEveryProblemJSON checks the same for a JSON document.
func TestDecodeValidEveryProblemJSON(t *testing.T) {
	doc := `{"apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob",
	  "metadata": {"name": "Bad_Name"},
	  "spec": {"framework": "pytorch", "command": ["x"], "timeout": 5,
	    "roles": {"worker": {"replicas": "two", "resources": {"cpu": "lots"}}},
	    "checkpoint": {"uri": "gs://x", "keep": -1}}}`
	_, err := schemas.DecodeValid([]byte(doc), schemas.DecodeTrainingJob)
	list, ok := errors.AsType[schemas.ErrorList](err)
	if !ok {
		t.Fatalf("DecodeValid: got %T %v, want an ErrorList", err, err)
	}
	want := []string{"metadata.name", "spec.checkpoint.keep", "spec.checkpoint.uri", "spec.roles.worker.replicas",
		"spec.roles.worker.resources.cpu", "spec.timeout"}
	if got := list.Fields(); !slices.Equal(got, want) {
		t.Errorf("fields:\n got %q\nwant %q\n%v", got, want, list)
	}
}

// TestDecodeValidUndecodableRest checks that problems which leave nothing to validate (a
// kind that does not exist) are reported alone.
func TestDecodeValidUndecodableRest(t *testing.T) {
	_, err := schemas.DecodeValid([]byte("kind: Nope\nspec: {timeout: soon}\n"), schemas.Decode)
	list, ok := errors.AsType[schemas.ErrorList](err)
	if !ok || len(list) != 1 || list[0].Field != "kind" {
		t.Fatalf("got %v, want only the kind", err)
	}
	_, err = schemas.DecodeValid([]byte("apiVersion: opendlc.io/v1alpha1\nkind: Schedule\nmetadata: {name: a}\n"), schemas.DecodeTrainingJob)
	if err == nil || !strings.Contains(err.Error(), "kind: must be TrainingJob") {
		t.Fatalf("got %v, want the kind", err)
	}
}

var everyProblemCases = []struct {
	name string
	doc  string
	want []string
}{
	{
		name: "TrainingJob",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: ResNet_DDP, workspace: vision}
spec:
  framework: pytorh                      # semantic: unknown framework
  command: [torchrun, train.py]
  roles:
    worker:
      replicas: 0                        # semantic: must be >= 1
      resources: {cpu: "8", memory: 64Gx, gpu: -1}   # type: bad quantity; semantic: negative gpu
    master:
      replicas: two                      # type: not an integer
  checkpoint: {uri: "gs://ckpt/resnet", every: 30 minutes, keep: 3}  # semantic uri; type every
  timeout: 72hours                       # type: bad duration
  tiemout: 1h                            # type: unknown field
`,
		want: []string{"metadata.name", "spec.checkpoint.every", "spec.checkpoint.uri", "spec.framework",
			"spec.roles.master.replicas", "spec.roles.worker.replicas", "spec.roles.worker.resources.gpu",
			"spec.roles.worker.resources.memory", "spec.tiemout", "spec.timeout"},
	},
	{
		name: "Experiment",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: tune}
spec:
  searchSpace:
    - {name: lr, type: float, min: 3, max: 0.01}
    - {name: bs, type: categorical, values: 8}
  objective: {metric: accuracy, direction: upward}
  maxTrials: many
  parallelism: 4
  trialTemplate:
    framework: custom
    command: [train]
    roles: {worker: {replicas: 1, resources: {cpu: one}}}
    timeout: 10 minutes
`,
		want: []string{"spec.maxTrials", "spec.objective.direction", "spec.searchSpace[0].max", "spec.searchSpace[1].values",
			"spec.trialTemplate.roles.worker.resources.cpu", "spec.trialTemplate.timeout"},
	},
	{
		name: "Schedule",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec:
  cron: "0 25 * * *"
  timeZone: Mars/Olympus
  catchupWindow: half a day
  historyLimit: lots
  action:
    jobTemplate:
      spec:
        framework: custom
        command: [train]
        roles: {worker: {replicas: -1}}
        timeout: soon
`,
		want: []string{"spec.action.jobTemplate.spec.roles.worker.replicas", "spec.action.jobTemplate.spec.timeout",
			"spec.catchupWindow", "spec.cron", "spec.historyLimit", "spec.timeZone"},
	},
	{
		name: "Pipeline",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: retrain}
spec:
  steps:
    - name: prep
      dependsOn: [nowhere]
      job:
        framework: custom
        command: [prep]
        roles: {worker: {replicas: 1, resources: {memory: big}}}
    - name: train
      dependsOn: prep
      job:
        framework: pytorch
        roles: {worker: {replicas: 0}}
        timeout: 1 hour
`,
		want: []string{"spec.steps[0].dependsOn[0]", "spec.steps[0].job.roles.worker.resources.memory", "spec.steps[1].dependsOn",
			"spec.steps[1].job.command", "spec.steps[1].job.roles.worker.replicas", "spec.steps[1].job.timeout"},
	},
	{
		name: "Trigger",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-data}
spec:
  subject: "dlc.default.s3.>"
  filter: {field: x}
  action:
    job:
      framework: tensorflw
      command: [train]
      roles: {worker: {replicas: 1, resources: {gpu: some}}}
`,
		want: []string{"spec.action.job.framework", "spec.action.job.roles.worker.resources.gpu", "spec.filter", "spec.subject"},
	},
	{
		name: "NotificationRule",
		doc: `apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: cv-terminal}
spec:
  match: {phases: [Finished]}
  webhook: {url: "ftp://hooks.example.com", timeout: five seconds}
  delivery: {maxAttempts: eight, backoff: {initial: 2s, max: 1s}}
`,
		want: []string{"spec.delivery.backoff.initial", "spec.delivery.maxAttempts", "spec.match.phases[0]", "spec.webhook.secret",
			"spec.webhook.timeout", "spec.webhook.url"},
	},
}

// TestDecodeValidTypoIsOneMistake checks that a misspelt field is reported once, as
// unknown with a suggestion, and not a second time as the missing field it was meant to
// be; a missing field without a typo is still reported.
func TestDecodeValidTypoIsOneMistake(t *testing.T) {
	doc := `apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: tune}
spec:
  searchSpace: [{name: lr, type: float, min: 0.1, max: 1}]
  objective: {metric: accuracy, direction: maximize}
  maxTrial: 4
  trialTemplate:
    framework: custom
    command: [train]
    roles: {worker: {replicaz: 1}}
`
	_, err := schemas.DecodeValid([]byte(doc), schemas.Decode)
	list, ok := errors.AsType[schemas.ErrorList](err)
	if !ok {
		t.Fatalf("DecodeValid: %v, want an ErrorList", err)
	}
	want := []string{"spec.maxTrial", "spec.trialTemplate.roles.worker.replicaz"}
	if got := list.Fields(); !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q\n%v", got, want, list)
	}
}
