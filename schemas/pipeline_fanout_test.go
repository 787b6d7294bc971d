package schemas_test

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// fanOutPipeline is list, then each (a fan-out over list's output), then report (which
// reads each's outputs), with ${item} in a step that does not fan out left as written.
const fanOutPipeline = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fo, workspace: vision}
spec:
  params: [{name: shards, default: '["a","b"]'}]
  steps:
    - name: list
      outputs: {shards: "${params.shards}"}
      job: {framework: custom, command: [sh, -c, 'for item in a b; do echo ${item}; done'], roles: {worker: {replicas: 1}}}
    - name: each
      dependsOn: [list]
      withParam: "${steps.list.outputs.shards}"
      parallelism: 2
      outputs: {result: "s3://dlc/out/${item}"}
      job: {framework: custom, command: [p, "${item}"], roles: {worker: {replicas: 1}}, checkpoint: {uri: "s3://dlc/ckpt/${item}"}}
    - name: grid
      withItems: [{lr: 0.1}, {lr: 0.01}]
      job: {framework: custom, command: [t, "${item.lr}"], roles: {worker: {replicas: 1}}}
    - name: report
      dependsOn: [each, grid]
      job:
        framework: custom
        command: [r, "${steps.each.outputs.jobs}", "${steps.each.outputs.result}", "${steps.each.outputs.checkpointURI}", "${steps.grid.outputs.jobs}"]
        roles: {worker: {replicas: 1}}
`

func TestPipelineFanOutValid(t *testing.T) {
	p := decodePipeline(t, fanOutPipeline)
	checkValidate(t, p, nil)
	if !p.Spec.Steps[1].FanOut() || p.Spec.Steps[0].FanOut() {
		t.Error("FanOut")
	}
}

func TestPipelineFanOutInvalid(t *testing.T) {
	tests := map[string]struct {
		edit func(p *schemas.Pipeline)
		want schemas.ErrorList
	}{
		"both lists": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].WithItems = []any{"x"} },
			want: schemas.ErrorList{{Field: "spec.steps[1].withParam", Detail: "set only one of withItems and withParam"}},
		},
		"empty list": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].WithItems = []any{} },
			want: schemas.ErrorList{{Field: "spec.steps[2].withItems", Detail: "the list has 0 items; a fan-out takes 1 to 64"}},
		},
		"null item": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].WithItems = []any{map[string]any{"lr": 1}, nil} },
			want: schemas.ErrorList{{Field: "spec.steps[2].withItems", Detail: "item 1 is null"}},
		},
		"parallelism out of bounds": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Parallelism = 65 },
			want: schemas.ErrorList{{Field: "spec.steps[1].parallelism", Detail: "must be <= 64"}},
		},
		"parallelism without fan-out": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[0].Parallelism = 2 },
			want: schemas.ErrorList{{Field: "spec.steps[0].parallelism", Detail: "only a fan-out step (withItems or withParam) has a parallelism"}},
		},
		"condition fans out": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[2].Job = nil
				p.Spec.Steps[2].Condition = &schemas.StepCondition{Expression: "1 > 0"}
			},
			want: schemas.ErrorList{{Field: "spec.steps[2].withItems", Detail: "only a job step can fan out"},
				{Field: "spec.steps[3].job.command[4]", Detail: "${steps.grid.outputs.jobs}: step grid is a condition: it has no outputs or metrics"}},
		},
		"withParam not a reference": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].WithParam = `["a"]` },
			want: schemas.ErrorList{{Field: "spec.steps[1].withParam", Detail: "must be exactly one reference, ${steps.<step>.outputs.<key>} or ${params.<name>}"}},
		},
		"withParam of a step not upstream": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].DependsOn = nil },
			want: schemas.ErrorList{{Field: "spec.steps[1].withParam", Detail: "${steps.list.outputs.shards}: step list is not upstream of each; add it to dependsOn"}},
		},
		"retries": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].Retries = &schemas.StepRetries{Count: 1} },
			want: schemas.ErrorList{{Field: "spec.steps[2].retries", Detail: "a fan-out step cannot be retried (not yet): retry the run instead"}},
		},
		"item field missing": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].WithItems = []any{map[string]any{"lr": 0.1}, "x"} },
			want: schemas.ErrorList{{Field: "spec.steps[2].job.command[1]", Detail: `${item.lr}: withItems[1] is not an object with field "lr"`}},
		},
		"job of a fan-out step": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[3].Job.Command[1] = "${steps.each.outputs.job}" },
			want: schemas.ErrorList{{Field: "spec.steps[3].job.command[1]",
				Detail: "${steps.each.outputs.job}: step each fans out: it has outputs.jobs, the list of its children's jobs, and no job"}},
		},
		"metrics of a fan-out step": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[3].Job.Command[1] = "${steps.each.metrics.loss}" },
			want: schemas.ErrorList{{Field: "spec.steps[3].job.command[1]", Detail: "${steps.each.metrics.loss}: step each fans out: it has no metrics"}},
		},
		"jobs of a step that does not fan out": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[3].Job.Command[1] = "${steps.list.outputs.jobs}" },
			want: schemas.ErrorList{{Field: "spec.steps[3].job.command[1]", Detail: `${steps.list.outputs.jobs}: step list has no output "jobs"`}},
		},
		"declared output jobs": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].Outputs["jobs"] = "s3://x" },
			want: schemas.ErrorList{{Field: "spec.steps[1].outputs.jobs", Detail: `"jobs" is a built-in output of a fan-out step`}},
		},
		"children's names too long": {
			edit: func(p *schemas.Pipeline) { p.Metadata.Name = strings.Repeat("a", 50-len("-each-63")+1) },
			want: schemas.ErrorList{{Field: "spec.steps[1].name",
				Detail: "a child's job name <pipeline>-each-63 would be longer than 50 characters; shorten the pipeline's or the step's name"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := decodePipeline(t, fanOutPipeline)
			tc.edit(p)
			checkValidate(t, p, tc.want)
		})
	}
}
