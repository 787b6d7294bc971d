package schemas_test

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// exitPipeline is train, with onExit steps notify (reading the outcome and train's
// checkpoint) and cleanup after it.
const exitPipeline = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: ex, workspace: vision}
spec:
  steps:
    - name: train
      job: {framework: custom, command: [t], roles: {worker: {replicas: 1}}, checkpoint: {uri: "s3://dlc/ckpt/ex"}}
  onExit:
    - name: notify
      job:
        framework: custom
        command: [notify, "${pipeline.status}", "${pipeline.failedStep}", "${pipeline.message}", "${steps.train.outputs.checkpoint}"]
        roles: {worker: {replicas: 1}}
      outputs: {report: "s3://dlc/reports/${pipeline.name}"}
    - name: cleanup
      dependsOn: [notify]
      job: {framework: custom, command: [c, "${steps.notify.outputs.report}"], roles: {worker: {replicas: 1}}}
`

func TestPipelineOnExitValid(t *testing.T) {
	p := decodePipeline(t, exitPipeline)
	checkValidate(t, p, nil)
	if got := len(p.Spec.AllSteps()); got != 3 {
		t.Errorf("AllSteps: %d, want 3", got)
	}
}

func TestPipelineOnExitInvalid(t *testing.T) {
	tests := map[string]struct {
		edit func(p *schemas.Pipeline)
		want schemas.ErrorList
	}{
		"outcome outside onExit": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[0].Job.Command[0] = "${pipeline.status}" },
			want: schemas.ErrorList{{Field: "spec.steps[0].job.command[0]", Detail: "${pipeline.status}: the run's outcome is known only in spec.onExit steps"}},
		},
		"onExit depends on a step": {
			edit: func(p *schemas.Pipeline) { p.Spec.OnExit[0].DependsOn = []string{"train"} },
			want: schemas.ErrorList{{Field: "spec.onExit[0].dependsOn[0]",
				Detail: "an onExit step runs once every step has ended; dependsOn names other onExit steps only"}},
		},
		"name taken by a step": {
			edit: func(p *schemas.Pipeline) { p.Spec.OnExit[1].Name = "train" },
			want: schemas.ErrorList{{Field: "spec.onExit[1].name", Detail: `duplicate name "train" (first at spec.steps[0])`}},
		},
		"onExit step not upstream": {
			edit: func(p *schemas.Pipeline) { p.Spec.OnExit[1].DependsOn = nil },
			want: schemas.ErrorList{{Field: "spec.onExit[1].job.command[1]",
				Detail: "${steps.notify.outputs.report}: step notify is not upstream of cleanup; add it to dependsOn"}},
		},
		"cycle among onExit steps": {
			edit: func(p *schemas.Pipeline) { p.Spec.OnExit[0].DependsOn = []string{"cleanup"} },
			want: schemas.ErrorList{{Field: "spec.onExit[1].dependsOn", Detail: "cycle notify → cleanup → notify"}},
		},
		"step without a kind": {
			edit: func(p *schemas.Pipeline) { p.Spec.OnExit[1].Job = nil },
			want: schemas.ErrorList{{Field: "spec.onExit[1]", Detail: "must set job, experiment or condition"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := decodePipeline(t, exitPipeline)
			tc.edit(p)
			checkValidate(t, p, tc.want)
		})
	}
}
