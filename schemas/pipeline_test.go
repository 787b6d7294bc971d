package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// retrainPipeline is the nightly retraining pipeline of the docs: preprocess → train →
// evaluate → better (a condition) → promote.
const retrainPipeline = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: retrain, workspace: vision, labels: {team: cv}}
spec:
  params:
    - {name: dataKey, default: clicks/latest}
    - {name: currentAccuracy, default: "0.8"}
  steps:
    - name: preprocess
      job:
        framework: custom
        command: [sh, -c, 'echo preprocessing $KEY for ${pipeline.name}']
        env: [{name: KEY, value: "${params.dataKey}"}]
        roles: {worker: {replicas: 1}}
      outputs: {dataset: "s3://dlc/datasets/${pipeline.name}"}
    - name: train
      dependsOn: [preprocess]
      job:
        framework: pytorch
        command: [trainer, --data, "${steps.preprocess.outputs.dataset}"]
        roles: {worker: {replicas: 2}}
        checkpoint: {uri: "s3://dlc/ckpt/${pipeline.name}"}
    - name: evaluate
      dependsOn: [train]
      job:
        framework: custom
        command: [sh, -c, 'echo evaluating $MODEL; echo "dlc:metric accuracy=0.9"']
        env: [{name: MODEL, value: "${steps.train.outputs.checkpoint}"}]
        roles: {worker: {replicas: 1}}
    - name: better
      dependsOn: [evaluate]
      condition: {expression: "steps.evaluate.metrics.accuracy > params.currentAccuracy"}
    - name: promote
      dependsOn: [better]
      job:
        framework: custom
        command: [sh, -c, 'echo promoting ${steps.train.outputs.checkpoint} ${HOME}']
        roles: {worker: {replicas: 1}}
`

// wantedError checks err: with wantErr set it must be an error of exactly that
// message, otherwise nil. It reports whether an error was wanted (and found), so that
// the caller checks the results only when none was.
func wantedError(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

func decodePipeline(t *testing.T, doc string) *schemas.Pipeline {
	t.Helper()
	return decodeAs[*schemas.Pipeline](t, doc)
}

func TestPipelineValid(t *testing.T) {
	p := checkValidDoc(t, retrainPipeline, "DecodePipeline", schemas.DecodePipeline)
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, p.Spec.TopoOrder()); diff != "" {
		t.Errorf("TopoOrder (-want +got):\n%s", diff)
	}
}

func TestDecodePipelineWrongKind(t *testing.T) {
	_, err := schemas.DecodePipeline([]byte("kind: Trigger\nmetadata: {name: a}\n"))
	checkErrorList(t, "DecodePipeline", err, schemas.ErrorList{{Field: "kind", Detail: "must be Pipeline"}})
}

// TestPipelineInvalid checks each mistake is reported with its field path; every case
// edits the valid retrain pipeline.
func TestPipelineInvalid(t *testing.T) {
	tests := map[string]struct {
		edit func(p *schemas.Pipeline)
		want schemas.ErrorList
	}{
		"unknown dependsOn": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].DependsOn = []string{"preprocesss"} },
			want: schemas.ErrorList{
				{Field: "spec.steps[1].dependsOn[0]", Detail: `unknown step "preprocesss"`},
				{Field: "spec.steps[1].job.command[2]", Detail: "${steps.preprocess.outputs.dataset}: step preprocess is not upstream of train; add it to dependsOn"},
			},
		},
		"cycle": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].DependsOn = []string{"preprocess", "evaluate"} },
			want: schemas.ErrorList{{Field: "spec.steps[2].dependsOn", Detail: "cycle train → evaluate → train"}},
		},
		"three-step cycle": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[0].DependsOn = []string{"evaluate"} },
			want: schemas.ErrorList{{Field: "spec.steps[1].dependsOn", Detail: "cycle preprocess → train → evaluate → preprocess"}},
		},
		"depends on itself": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[1].DependsOn = []string{"preprocess", "train"} },
			want: schemas.ErrorList{{Field: "spec.steps[1].dependsOn[1]", Detail: "a step cannot depend on itself"}},
		},
		"duplicate name": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[4].Name = "train" },
			want: schemas.ErrorList{{Field: "spec.steps[4].name", Detail: `duplicate name "train" (first at spec.steps[1])`}},
		},
		"duplicate dependency": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[2].DependsOn = []string{"train", "train"} },
			want: schemas.ErrorList{{Field: "spec.steps[2].dependsOn[1]", Detail: `duplicate "train" (first at spec.steps[2].dependsOn[0])`}},
		},
		"reference to a step that is not upstream": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[0].Job.Env[0].Value = "${steps.evaluate.metrics.accuracy}"
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[0].job.env[0].value", Detail: "${steps.evaluate.metrics.accuracy}: step evaluate is not upstream of preprocess; add it to dependsOn"},
			},
		},
		"reference to an unknown step and parameter": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[2].Job.Command = []string{"eval", "${steps.nope.outputs.job}", "${params.nope}"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[2].job.command[1]", Detail: `${steps.nope.outputs.job}: unknown step "nope"`},
				{Field: "spec.steps[2].job.command[2]", Detail: `${params.nope}: no parameter "nope" in spec.params`},
			},
		},
		"outputs a step does not have": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[2].Job.Command = []string{"eval", "${steps.preprocess.outputs.checkpoint}", "${steps.train.outputs.model}"}
				p.Spec.Steps[2].DependsOn = []string{"train", "preprocess"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[2].job.command[1]", Detail: "${steps.preprocess.outputs.checkpoint}: step preprocess has no spec.checkpoint"},
				{Field: "spec.steps[2].job.command[2]", Detail: `${steps.train.outputs.model}: step train has no output "model"`},
			},
		},
		"metrics of a condition": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[4].Job.Args = []string{"${steps.better.metrics.x}"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[4].job.args[0]", Detail: "${steps.better.metrics.x}: step better is a condition: it has no outputs or metrics"},
			},
		},
		"bad references": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[0].Job.Args = []string{"${steps.train.output.x}", "${pipeline.uid}", "${event.data.key}", "${params.unterminated"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[0].job.args[0]", Detail: "${steps.train.output.x}: must be ${steps.<step>.outputs.<key>} or ${steps.<step>.metrics.<key>}"},
				{Field: "spec.steps[0].job.args[1]", Detail: "${pipeline.uid}: must be ${pipeline.name}, ${pipeline.workspace}, or in an onExit step ${pipeline.status}, ${pipeline.failedStep} or ${pipeline.message}"},
				{Field: "spec.steps[0].job.args[2]", Detail: "${event.data.key}: event fields are available only in a Trigger's spec.params"},
				{Field: "spec.steps[0].job.args[3]", Detail: "unterminated ${params.unterminated"},
			},
		},
		"job and condition": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[3].Job = p.Spec.Steps[2].Job
				p.Spec.Steps[0].Job = nil
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[0]", Detail: "must set job, experiment or condition"},
				{Field: "spec.steps[1].job.command[2]", Detail: "${steps.preprocess.outputs.dataset}: step preprocess is a condition: it has no outputs or metrics"},
				{Field: "spec.steps[3]", Detail: "must set only one of job, experiment and condition"},
			},
		},
		"bad condition": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[3].Condition.Expression = "steps.evaluate.metrics.accuracy >"
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[3].condition.expression", Detail: `expected a comparison such as "a > b" at "steps.evaluate.metrics.accuracy >"`},
			},
		},
		"condition on outputs": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[3].Condition.Expression = "steps.evaluate.outputs.job > 1"
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[3].condition.expression", Detail: `"steps.evaluate.outputs.job": an operand is a number, params.<name> or steps.<step>.metrics.<key>`},
			},
		},
		"condition on a step that is not upstream": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[3].DependsOn = []string{"train"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[3].condition.expression", Detail: "${steps.evaluate.metrics.accuracy}: step evaluate is not upstream of better; add it to dependsOn"},
			},
		},
		"outputs": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[0].Outputs = map[string]string{"checkpoint": "s3://x/y", "9bad": "s3://x/z", "empty": ""}
				p.Spec.Steps[1].Job.Command = []string{"trainer"}
			},
			want: schemas.ErrorList{
				{Field: "spec.steps[0].outputs.9bad", Detail: "output key must be at most 64 letters, digits and '_', starting with a letter"},
				{Field: "spec.steps[0].outputs.checkpoint", Detail: `"checkpoint" is a built-in output of every job step`},
				{Field: "spec.steps[0].outputs.empty", Detail: "must not be empty"},
			},
		},
		"outputs of a condition": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps[3].Outputs = map[string]string{"x": "y"} },
			want: schemas.ErrorList{{Field: "spec.steps[3].outputs", Detail: "only a job step has outputs"}},
		},
		"job name too long": {
			edit: func(p *schemas.Pipeline) { p.Metadata.Name = strings.Repeat("r", 40) },
			want: schemas.ErrorList{
				{Field: "spec.steps[0].name", Detail: "the step's job name <pipeline>-preprocess would be longer than 50 characters; shorten the pipeline's or the step's name"},
			},
		},
		"invalid job spec and parameter": {
			edit: func(p *schemas.Pipeline) {
				p.Spec.Steps[0].Job.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 0}}
				p.Spec.Params = append(p.Spec.Params, schemas.PipelineParam{Name: "dataKey"}, schemas.PipelineParam{Name: "1x"})
			},
			want: schemas.ErrorList{
				{Field: "spec.params[2].name", Detail: `duplicate parameter "dataKey"`},
				{Field: "spec.params[3].name", Detail: "must be a C identifier: letters, digits and '_', not starting with a digit"},
				{Field: "spec.steps[0].job.roles.worker.replicas", Detail: "must be >= 1"},
			},
		},
		"no steps": {
			edit: func(p *schemas.Pipeline) { p.Spec.Steps = nil; p.Spec.Params = nil },
			want: schemas.ErrorList{{Field: "spec.steps", Detail: "must have at least 1 items"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := decodePipeline(t, retrainPipeline)
			tc.edit(p)
			checkValidate(t, p, tc.want)
		})
	}
}

func TestPipelineTopoOrderParallel(t *testing.T) {
	spec := schemas.PipelineSpec{Steps: []schemas.PipelineStep{
		{Name: "report", DependsOn: []string{"eval-a", "eval-b"}},
		{Name: "eval-a", DependsOn: []string{"train"}},
		{Name: "train"},
		{Name: "eval-b", DependsOn: []string{"train"}},
	}}
	if diff := cmp.Diff([]int{2, 1, 3, 0}, spec.TopoOrder()); diff != "" {
		t.Errorf("TopoOrder (-want +got):\n%s", diff)
	}
}

func TestPipelineResolveParams(t *testing.T) {
	def := "d"
	spec := schemas.PipelineSpec{Params: []schemas.PipelineParam{{Name: "a", Default: &def}, {Name: "b"}}}
	tests := map[string]struct {
		given    map[string]string
		want     map[string]string
		wantErrs schemas.ErrorList
	}{
		"defaults": {given: map[string]string{"b": "1"}, want: map[string]string{"a": "d", "b": "1"}},
		"given":    {given: map[string]string{"a": "x", "b": ""}, want: map[string]string{"a": "x", "b": ""}},
		"missing and unknown": {
			given: map[string]string{"c": "1"},
			want:  map[string]string{"a": "d"},
			wantErrs: schemas.ErrorList{
				{Field: "params.b", Detail: "required: the pipeline declares it without a default"},
				{Field: "params.c", Detail: "not a parameter of the pipeline"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := spec.ResolveParams(tc.given)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrs, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandTemplate(t *testing.T) {
	values := map[string]string{
		"${params.lr}":                       "0.1",
		"${steps.train.outputs.checkpoint}":  "s3://b/ck/000000000010",
		"${steps.eval.metrics.val/loss}":     "0.25",
		"${pipeline.name}":                   "retrain",
		"${event.data.Records[0].s3.bucket}": "datasets",
	}
	resolve := func(r schemas.TemplateRef) (string, error) {
		v, ok := values[r.String()]
		if !ok {
			return "", errors.New("no value for " + r.String())
		}
		return v, nil
	}
	tests := map[string]struct {
		in, want, wantErr string
	}{
		"plain":             {in: "no references", want: "no references"},
		"several":           {in: "--lr=${params.lr} --from ${steps.train.outputs.checkpoint}", want: "--lr=0.1 --from s3://b/ck/000000000010"},
		"metric with slash": {in: "${steps.eval.metrics.val/loss}", want: "0.25"},
		"pipeline and event": {
			in: "${pipeline.name}/${event.data.Records[0].s3.bucket}", want: "retrain/datasets",
		},
		"shell variables stay": {in: "echo ${HOME} $PATH ${params.lr}", want: "echo ${HOME} $PATH 0.1"},
		"unterminated shell":   {in: "echo ${HOME", want: "echo ${HOME"},
		"unterminated ours":    {in: "echo ${params.lr", wantErr: "unterminated ${params.lr"},
		"resolve error":        {in: "${params.other}", wantErr: "no value for ${params.other}"},
		"bad param name":       {in: "${params.a-b}", wantErr: "${params.a-b}: a parameter name is letters, digits and '_'"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := schemas.ExpandTemplate(tc.in, resolve)
			if wantedError(t, err, tc.wantErr) {
				return
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConditionEval(t *testing.T) {
	values := map[string]float64{"params.current": 0.8, "steps.evaluate.metrics.accuracy": 0.9, "steps.evaluate.metrics.loss": 0.3}
	resolve := func(r schemas.TemplateRef) (float64, error) {
		v, ok := values[r.Raw]
		if !ok {
			return 0, errors.New(r.Raw + ": not reported")
		}
		return v, nil
	}
	tests := map[string]struct {
		expr    string
		want    bool
		explain string
		wantErr string
	}{
		"greater": {
			expr: "steps.evaluate.metrics.accuracy > params.current", want: true,
			explain: "steps.evaluate.metrics.accuracy (0.9) > params.current (0.8)",
		},
		"braces and literal": {
			expr: "${steps.evaluate.metrics.accuracy}<=0.85", want: false,
			explain: "steps.evaluate.metrics.accuracy (0.9) <= 0.85",
		},
		"and binds tighter than or": {
			expr: "0 > 1 && 1 > 0 || steps.evaluate.metrics.loss < 0.5", want: true,
			explain: "0 > 1 && 1 > 0 || steps.evaluate.metrics.loss (0.3) < 0.5",
		},
		"equal and not equal": {expr: "1 == 1.0 && -2 != -2", want: false, explain: "1 == 1 && -2 != -2"},
		"missing metric":      {expr: "steps.evaluate.metrics.f1 > 0", wantErr: "steps.evaluate.metrics.f1: not reported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := schemas.ParseCondition(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			got, explain, err := c.Eval(resolve)
			if wantedError(t, err, tc.wantErr) {
				return
			}
			if got != tc.want || explain != tc.explain {
				t.Errorf("Eval = %v, %q; want %v, %q", got, explain, tc.want, tc.explain)
			}
		})
	}
}

func TestParseConditionErrors(t *testing.T) {
	tests := map[string]string{
		"":                             "empty expression",
		"a":                            `expected a comparison such as "a > b" at "a"`,
		"1 = 2":                        `unexpected '=' at column 3`,
		"1 > 2 and 2 > 1":              `expected && or || after "1 > 2", got "and"`,
		"1 ~ 2":                        `expected one of <= >= == != < > after "1", got "~"`,
		"steps.a.outputs.x > 1":        `"steps.a.outputs.x": an operand is a number, params.<name> or steps.<step>.metrics.<key>`,
		"foo > 1":                      `"foo": an operand is a number, params.<name> or steps.<step>.metrics.<key>`,
		"${steps.a.metrics.x > 1":      `unterminated "${steps.a.metrics.x > 1"`,
		"params.x > 1 &&":              `expected a comparison such as "a > b" at ""`,
		"steps.evaluate.metrics > 0.5": "${steps.evaluate.metrics}: must be ${steps.<step>.outputs.<key>} or ${steps.<step>.metrics.<key>}",
	}
	for expr, want := range tests {
		t.Run(expr, func(t *testing.T) {
			_, err := schemas.ParseCondition(expr)
			if err == nil || err.Error() != want {
				t.Errorf("ParseCondition(%q) = %v, want %q", expr, err, want)
			}
		})
	}
}

func TestFieldPath(t *testing.T) {
	doc := map[string]any{
		"id": "e1",
		"data": map[string]any{
			"Records": []any{map[string]any{"s3": map[string]any{"object": map[string]any{"key": "clicks/a.csv", "size": 12.0}}}},
			"x-amz":   true,
		},
	}
	tests := map[string]struct {
		path   string
		want   any
		wantOK bool
	}{
		"top":          {path: "id", want: "e1", wantOK: true},
		"deep":         {path: "data.Records[0].s3.object.key", want: "clicks/a.csv", wantOK: true},
		"number":       {path: "data.Records[0].s3.object.size", want: 12.0, wantOK: true},
		"dash":         {path: "data.x-amz", want: true, wantOK: true},
		"out of range": {path: "data.Records[1].s3"},
		"not a list":   {path: "data[0]"},
		"missing":      {path: "data.nope"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := schemas.ParseFieldPath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != tc.path {
				t.Errorf("String() = %q, want %q", p.String(), tc.path)
			}
			got, ok := p.Lookup(doc)
			if ok != tc.wantOK || !cmp.Equal(got, tc.want) {
				t.Errorf("Lookup = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	for _, bad := range []string{"", "a..b", "a[x]", "a[0", ".a", "a b"} {
		if _, err := schemas.ParseFieldPath(bad); err == nil {
			t.Errorf("ParseFieldPath(%q) succeeded, want an error", bad)
		}
	}
}

// The examples in the repository are valid documents.
func TestPipelineAndTriggerExamplesAreValid(t *testing.T) {
	for _, file := range []string{"../examples/pipeline/retrain.yaml", "../examples/pipeline/tune-and-train.yaml", "../examples/pipeline/fan-out.yaml",
		"../examples/trigger/on-new-data.yaml"} {
		t.Run(file, func(t *testing.T) {
			schemastest.ReadValid(t, file, schemas.Decode)
		})
	}
}
