package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// validYAMLJob is testdata/valid.yaml after Default.
func validYAMLJob() *schemas.TrainingJob {
	return schemastest.Job("resnet-ddp").Workspace("vision").
		Label("team", "cv").Label("app.kubernetes.io/name", "resnet").
		Annotation("opendlc.io/owner", "alice@example.com").
		Image("registry.local/train:1.4").
		Command("torchrun", "train.py", "--lr", "${params.lr}").
		Args("--epochs", "90").
		Env("NCCL_DEBUG", "INFO").Env("EMPTY", "").
		WorkingDir("/workspace").
		Role("master", 1).CPU("4").Memory("16Gi").
		Role("worker", 4).CPU("8").Memory("64Gi").GPUs(8).RoleEnv("ROLE", "worker").
		NodeSelector("nvidia.com/gpu.product", "H100-SXM").
		Toleration(schemas.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}).
		Pool(schemas.PoolQuota).
		MaxRestarts(3).HangTimeout(10*time.Minute).
		Mutate(func(j *schemas.TrainingJob) { j.Spec.FaultTolerance.ExcludeFailedNodes = new(true) }).
		HealthCheck(5*time.Minute).
		Checkpoint("s3://ckpt/resnet", 30*time.Minute, 3).
		Data("imagenet", "s3://datasets/imagenet", "/data").Data("labels", "./labels", "").
		ForwardLogs(true).
		Timeout(72 * time.Hour).
		Obj()
}

// minimalJob is the smallest valid job, before Default.
const minimalYAML = `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: mnist}
spec:
  framework: pytorch
  command: [python, mnist.py]
  roles: {worker: {replicas: 1}}
`

// minimalJob is minimalYAML (and testdata/minimal.json) after Default.
func minimalJob() *schemas.TrainingJob {
	return schemastest.Job("mnist").Image("").Command("python", "mnist.py").
		Pool(schemas.PoolQuota).ForwardLogs(true).Obj()
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		doc  []byte
		want *schemas.TrainingJob
	}{
		"YAML using every field": {
			doc:  readFile(t, "testdata/valid.yaml"),
			want: validYAMLJob(),
		},
		"minimal YAML gets defaults": {
			doc:  []byte(minimalYAML),
			want: minimalJob(),
		},
		"JSON": {
			doc:  readFile(t, "testdata/minimal.json"),
			want: minimalJob(),
		},
		"JSON with a byte order mark": {
			doc:  append([]byte("\xef\xbb\xbf"), readFile(t, "testdata/minimal.json")...),
			want: minimalJob(),
		},
		"YAML flow mapping that starts like JSON": {
			doc: []byte(`{apiVersion: opendlc.io/v1alpha1, kind: TrainingJob, metadata: {name: mnist},
				spec: {framework: pytorch, command: [python, mnist.py], roles: {worker: {replicas: 1}}}}`),
			want: minimalJob(),
		},
		"YAML with a document start marker and comments": {
			doc:  []byte("# a job\n---\n" + minimalYAML + "# end\n"),
			want: minimalJob(),
		},
		"null values leave fields empty": {
			doc:  []byte(minimalYAML + "  timeout: null\n  checkpoint: ~\n  env:\n  resources: {pool: null}\n"),
			want: minimalJob(),
		},
		"set values are not defaulted": {
			doc: []byte(strings.Replace(minimalYAML, "{name: mnist}", "{name: mnist, workspace: nlp}", 1) +
				"  resources: {pool: spot, priority: 5}\n  logs: {forward: false}\n  healthCheck: {enabled: true, timeout: 1m}\n"),
			want: schemastest.Job("mnist").Workspace("nlp").Image("").Command("python", "mnist.py").
				Pool(schemas.PoolSpot).Priority(5).ForwardLogs(false).HealthCheck(time.Minute).Obj(),
		},
		"enabled health check gets the default timeout": {
			doc: []byte(minimalYAML + "  healthCheck: {enabled: true}\n"),
			want: schemastest.Job("mnist").Image("").Command("python", "mnist.py").
				Pool(schemas.PoolQuota).ForwardLogs(true).HealthCheck(5 * time.Minute).Obj(),
		},
		"quantities as YAML numbers": {
			doc: []byte(strings.Replace(minimalYAML, "{replicas: 1}", "{replicas: 1, resources: {cpu: 0.5, memory: 1e9}}", 1)),
			want: schemastest.Job("mnist").Image("").Command("python", "mnist.py").CPU("500m").Memory("1G").
				Pool(schemas.PoolQuota).ForwardLogs(true).Obj(),
		},
		"string values that YAML would read as other types, quoted": {
			doc: []byte(minimalYAML + `  env: [{name: A, value: "8"}, {name: B, value: "yes"}, {name: C, value: "1.0"}]` + "\n"),
			want: schemastest.Job("mnist").Image("").Command("python", "mnist.py").
				Env("A", "8").Env("B", "yes").Env("C", "1.0").
				Pool(schemas.PoolQuota).ForwardLogs(true).Obj(),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obj, err := schemas.Decode(tt.doc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, obj, schemastest.CmpOpts); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			job, err := schemas.DecodeTrainingJob(tt.doc)
			if err != nil {
				t.Fatalf("DecodeTrainingJob: %v", err)
			}
			if diff := cmp.Diff(tt.want, job, schemastest.CmpOpts); diff != "" {
				t.Errorf("DecodeTrainingJob (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeRoundTrip checks that what Decode returns marshals back to a document that
// decodes to the same job.
func TestDecodeRoundTrip(t *testing.T) {
	tests := map[string]struct {
		job *schemas.TrainingJob
	}{
		"every field": {job: validYAMLJob()},
		"minimal":     {job: minimalJob()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			doc, err := json.Marshal(tt.job)
			if err != nil {
				t.Fatal(err)
			}
			got, err := schemas.DecodeTrainingJob(doc)
			if err != nil {
				t.Fatalf("DecodeTrainingJob(%s): %v", doc, err)
			}
			if diff := cmp.Diff(tt.job, got, schemastest.CmpOpts); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeFieldErrors(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want schemas.ErrorList
	}{
		"unknown top-level field": {
			doc:  minimalYAML + "status: {phase: Running}\n",
			want: schemas.ErrorList{{Field: "status", Detail: "unknown field"}},
		},
		"unknown field in a role, with a suggestion": {
			doc:  strings.Replace(minimalYAML, "{replicas: 1}", "{replica: 1}", 1),
			want: schemas.ErrorList{{Field: "spec.roles.worker.replica", Detail: `unknown field; did you mean "replicas"?`}},
		},
		"field names are case-sensitive": {
			doc:  strings.Replace(minimalYAML, "command:", "Command:", 1),
			want: schemas.ErrorList{{Field: "spec.Command", Detail: `unknown field; did you mean "command"?`}},
		},
		"unknown fields at every depth, all at once": {
			doc: minimalYAML + `
  checkpoint: {uri: s3://ckpt/x, evry: 10m}
  data: [{name: d, uri: s3://data/d}, {name: e, uri: s3://data/e, mountpath: /e}]
  logs: {forward: true, level: debug}
  gpus: 8
extra: 1
` + "metadata2: {}\n",
			want: schemas.ErrorList{
				{Field: "extra", Detail: "unknown field"},
				{Field: "metadata2", Detail: `unknown field; did you mean "metadata"?`},
				{Field: "spec.checkpoint.evry", Detail: `unknown field; did you mean "every"?`},
				{Field: "spec.data[1].mountpath", Detail: `unknown field; did you mean "mountPath"?`},
				{Field: "spec.gpus", Detail: "unknown field"},
				{Field: "spec.logs.level", Detail: "unknown field"},
			},
		},
		"unknown fields in list items and maps of structs": {
			doc: strings.Replace(minimalYAML, "{replicas: 1}",
				"{replicas: 1, resources: {gpus: 1}, env: [{name: A, valu: b}], tolerations: [{key: k, operator: Exists, efect: NoSchedule}]}", 1) +
				"  env: [{name: A, value: b, secret: true}]\n",
			want: schemas.ErrorList{
				{Field: "spec.env[0].secret", Detail: "unknown field"},
				{Field: "spec.roles.worker.env[0].valu", Detail: `unknown field; did you mean "value"?`},
				{Field: "spec.roles.worker.resources.gpus", Detail: `unknown field; did you mean "gpu"?`},
				{Field: "spec.roles.worker.tolerations[0].efect", Detail: `unknown field; did you mean "effect"?`},
			},
		},
		"unknown field with an odd name": {
			doc:  minimalYAML + "  \"x.y/z\": 1\n",
			want: schemas.ErrorList{{Field: `spec["x.y/z"]`, Detail: "unknown field"}},
		},
		"type errors": {
			doc: `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: 5, labels: {team: 7}}
spec:
  framework: [pytorch]
  command: python train.py
  env: {name: A}
  roles:
    worker:
      replicas: two
      resources: {cpu: lots, memory: [1], gpu: 1.5}
      tolerations: [Exists]
    master: {replicas: 99999999999}
  resources: {priority: "1"}
  faultTolerance: {excludeFailedNodes: maybe, hangTimeout: 10}
  checkpoint: s3://ckpt/x
  logs: {forward: "true"}
  timeout: 10 minutes
`,
			want: schemas.ErrorList{
				{Field: "metadata.labels.team", Detail: "must be a string"},
				{Field: "metadata.name", Detail: "must be a string"},
				{Field: "spec.checkpoint", Detail: "must be an object"},
				{Field: "spec.command", Detail: "must be a list"},
				{Field: "spec.env", Detail: "must be a list"},
				{Field: "spec.faultTolerance.excludeFailedNodes", Detail: "must be a boolean (true or false)"},
				{Field: "spec.faultTolerance.hangTimeout", Detail: `must be a duration string such as "10m"`},
				{Field: "spec.framework", Detail: "must be a string"},
				{Field: "spec.logs.forward", Detail: "must be a boolean (true or false)"},
				{Field: "spec.resources.priority", Detail: "must be an integer"},
				{Field: "spec.roles.master.replicas", Detail: "must be an integer between -2147483648 and 2147483647"},
				{Field: "spec.roles.worker.replicas", Detail: "must be an integer"},
				{Field: "spec.roles.worker.resources.cpu", Detail: `must be a Kubernetes quantity such as "500m", "8" or "64Gi"`},
				{Field: "spec.roles.worker.resources.gpu", Detail: "must be an integer"},
				{Field: "spec.roles.worker.resources.memory", Detail: `must be a Kubernetes quantity such as "500m", "8" or "64Gi"`},
				{Field: "spec.roles.worker.tolerations[0]", Detail: "must be an object"},
				{Field: "spec.timeout", Detail: `invalid duration "10 minutes": must look like "90s", "10m" or "72h"`},
			},
		},
		"type errors in JSON": {
			doc: `{"apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "a"},
				"spec": {"framework": "pytorch", "command": ["python", 3], "roles": {"worker": {"replicas": "1"}}}}`,
			want: schemas.ErrorList{
				{Field: "spec.command[1]", Detail: "must be a string"},
				{Field: "spec.roles.worker.replicas", Detail: "must be an integer"},
			},
		},
		"roles must be a map, metadata an object": {
			doc: "apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata: mnist\nspec:\n  roles: [worker]\n",
			want: schemas.ErrorList{
				{Field: "metadata", Detail: "must be an object"},
				{Field: "spec.roles", Detail: "must be an object"},
			},
		},
		"unknown fields and type errors together, sorted": {
			doc: strings.Replace(minimalYAML, "{replicas: 1}", "{replicas: x, replica: 1}", 1) + "zzz: 1\n",
			want: schemas.ErrorList{
				{Field: "spec.roles.worker.replica", Detail: `unknown field; did you mean "replicas"?`},
				{Field: "spec.roles.worker.replicas", Detail: "must be an integer"},
				{Field: "zzz", Detail: "unknown field"},
			},
		},
		"duplicate keys in YAML": {
			doc: "apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: a\n  name: b\n" +
				"spec:\n  roles: {worker: {replicas: 1, replicas: 2}}\n  data:\n    - name: x\n      uri: /x\n      uri: /y\n",
			want: schemas.ErrorList{
				{Field: "metadata.name", Detail: "duplicate key at line 5 (first at line 4)"},
				{Field: "spec.data[0].uri", Detail: "duplicate key at line 11 (first at line 10)"},
				{Field: "spec.roles.worker.replicas", Detail: "duplicate key at line 7, column 33 (first at column 20)"},
			},
		},
		"duplicate top-level key in YAML": {
			doc:  minimalYAML + "kind: TrainingJob\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "duplicate key at line 9 (first at line 3)"}},
		},
		"duplicate keys in JSON": {
			doc: "{\"kind\": \"TrainingJob\",\n \"metadata\": {\"name\": \"a\", \"name\": \"b\"},\n \"kind\": \"TrainingJob\"}",
			want: schemas.ErrorList{
				{Field: "kind", Detail: "duplicate key at line 3 (first at line 1)"},
				{Field: "metadata.name", Detail: "duplicate key at line 2, column 28 (first at column 15)"},
			},
		},
		"missing kind": {
			doc:  "apiVersion: opendlc.io/v1alpha1\nmetadata: {name: a}\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "required; must be one of Experiment, NotificationRule, Pipeline, PipelineTemplate, Schedule, TrainingJob, Trigger"}},
		},
		"null kind": {
			doc:  "kind: null\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "required; must be one of Experiment, NotificationRule, Pipeline, PipelineTemplate, Schedule, TrainingJob, Trigger"}},
		},
		"unknown kind": {
			doc:  "apiVersion: opendlc.io/v1alpha1\nkind: Experimen\nmetadata: {name: a}\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "must be one of Experiment, NotificationRule, Pipeline, PipelineTemplate, Schedule, TrainingJob, Trigger"}},
		},
		"kind is not a string": {
			doc:  "kind: {name: TrainingJob}\n",
			want: schemas.ErrorList{{Field: "kind", Detail: "must be a string"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obj, err := schemas.Decode([]byte(tt.doc))
			if obj != nil {
				t.Errorf("Decode returned %v with error %v, want nil", obj, err)
			}
			checkErrorList(t, "Decode", err, tt.want)
		})
	}
}

func TestDecodeTrainingJobErrors(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want schemas.ErrorList
	}{
		"another kind, and every other problem too": {
			doc: strings.Replace(minimalYAML, "kind: TrainingJob", "kind: Schedule", 1) + "  cron: '@daily'\n",
			want: schemas.ErrorList{
				{Field: "kind", Detail: "must be TrainingJob"},
				{Field: "spec.cron", Detail: "unknown field"},
			},
		},
		"missing kind": {
			doc:  strings.Replace(minimalYAML, "kind: TrainingJob", "", 1),
			want: schemas.ErrorList{{Field: "kind", Detail: "required; must be TrainingJob"}},
		},
		"kind of another type": {
			doc:  strings.Replace(minimalYAML, "kind: TrainingJob", "kind: 1", 1),
			want: schemas.ErrorList{{Field: "kind", Detail: "must be a string"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			job, err := schemas.DecodeTrainingJob([]byte(tt.doc))
			if job != nil {
				t.Errorf("DecodeTrainingJob returned %v, want nil", job)
			}
			checkErrorList(t, "DecodeTrainingJob", err, tt.want)
		})
	}
}

func TestDecodeDocumentErrors(t *testing.T) {
	tooLarge := append([]byte(minimalYAML+"#"), bytes.Repeat([]byte("x"), schemas.MaxDocumentSize)...)
	// A row without wantIs is an ErrInvalidDocument: "schemas: invalid document: " + detail.
	tests := map[string]struct {
		doc     []byte
		wantIs  error
		wantErr string
		detail  string
	}{
		"over 1 MiB": {
			doc:     tooLarge,
			wantIs:  schemas.ErrDocumentTooLarge,
			wantErr: fmt.Sprintf("schemas: document too large: %d bytes; the limit is 1048576 bytes (1 MiB)", len(tooLarge)),
		},
		"empty":                      {doc: nil, detail: "the document is empty"},
		"only whitespace":            {doc: []byte(" \n\t\n"), detail: "the document is empty"},
		"only a comment":             {doc: []byte("# nothing\n"), detail: "the document is empty"},
		"null":                       {doc: []byte("~\n"), detail: "the document is empty"},
		"a list":                     {doc: []byte("- kind: TrainingJob\n"), detail: "the document must be an object (a mapping of field names to values), not a list"},
		"a JSON string":              {doc: []byte(`"TrainingJob"`), detail: "the document must be an object (a mapping of field names to values), not a string"},
		"two YAML documents":         {doc: []byte(minimalYAML + "---\n" + minimalYAML), detail: "found 2 YAML documents; submit one at a time"},
		"YAML syntax error":          {doc: []byte("kind: TrainingJob\nspec:\n  roles: {worker: [\n"), detail: "yaml: line 3: did not find expected node content"},
		"YAML tab indentation":       {doc: []byte("kind: TrainingJob\nspec:\n\troles: {}\n"), detail: "yaml: line 3: found character that cannot start any token"},
		"JSON syntax error":          {doc: []byte("{\"kind\": \"TrainingJob\",\n \"spec\": {\"roles\": }}"), detail: "invalid JSON at line 2, column 20: invalid character '}' looking for beginning of value"},
		"truncated JSON":             {doc: []byte(`{"kind": "TrainingJob", "spec": {`), detail: "invalid JSON: unexpected end of document"},
		"data after the JSON object": {doc: []byte(`{"kind": "TrainingJob"} {"kind": "TrainingJob"}`), detail: "unexpected data after the top-level object at line 1, column 25"},
		"too deeply nested":          {doc: []byte(`{"kind": "TrainingJob", "x": ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}"), detail: "values are nested more than 32 levels deep"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if tt.wantIs == nil {
				tt.wantIs, tt.wantErr = schemas.ErrInvalidDocument, "schemas: invalid document: "+tt.detail
			}
			obj, err := schemas.Decode(tt.doc)
			if obj != nil {
				t.Errorf("Decode returned %v, want nil", obj)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("Decode error %v, want one that is %v", err, tt.wantIs)
			}
			if _, ok := errors.AsType[schemas.ErrorList](err); ok {
				t.Errorf("Decode error %v is an ErrorList; want a document error", err)
			}
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("Decode error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeSizeLimit checks that a document of exactly MaxDocumentSize bytes is read.
func TestDecodeSizeLimit(t *testing.T) {
	doc := []byte(minimalYAML + "#")
	doc = append(doc, bytes.Repeat([]byte("x"), schemas.MaxDocumentSize-len(doc))...)
	if len(doc) != schemas.MaxDocumentSize {
		t.Fatalf("document is %d bytes, want %d", len(doc), schemas.MaxDocumentSize)
	}
	obj, err := schemas.Decode(doc)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(minimalJob(), obj, schemastest.CmpOpts); diff != "" {
		t.Errorf("Decode (-want +got):\n%s", diff)
	}
}

// checkErrorList fails t unless err is an ErrorList equal to want; call names
// the function that returned err.
func checkErrorList(t *testing.T, call string, err error, want schemas.ErrorList) {
	t.Helper()
	var got schemas.ErrorList
	if !errors.As(err, &got) {
		t.Fatalf("%s error %v (%T), want an ErrorList", call, err, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s errors (-want +got):\n%s", call, diff)
	}
}

// decodeAs decodes doc with schemas.Decode and fails t unless it is a T.
func decodeAs[T any](t *testing.T, doc string) T {
	t.Helper()
	obj, err := schemas.Decode([]byte(doc))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	v, ok := obj.(T)
	if !ok {
		var want T
		t.Fatalf("decoded a %T, want %T", obj, want)
	}
	return v
}

// checkValidDoc decodes doc with schemas.Decode, checks that it is a T that
// validates, and that decode (named call) gives the same; it returns the T.
func checkValidDoc[T interface{ Validate() schemas.ErrorList }](t *testing.T, doc, call string, decode func([]byte) (T, error)) T {
	t.Helper()
	v := decodeAs[T](t, doc)
	if errs := v.Validate(); errs != nil {
		t.Fatalf("Validate() = %v, want nil", errs)
	}
	direct, err := decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, direct); diff != "" {
		t.Errorf("%s differs from Decode (-Decode +%s):\n%s", call, call, diff)
	}
	return v
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// DecodeValid answers a valid document, and the decoding or validation problems of
// another, in that order.
func TestDecodeValid(t *testing.T) {
	job, err := schemas.DecodeValid([]byte(minimalYAML), schemas.DecodeTrainingJob)
	if err != nil || job == nil || job.Metadata.Name == "" {
		t.Fatalf("valid job: %v, %v", job, err)
	}
	if _, err := schemas.DecodeValid([]byte("kind: [x\n"), schemas.Decode); !errors.Is(err, schemas.ErrInvalidDocument) {
		t.Errorf("malformed document: %v, want ErrInvalidDocument", err)
	}
	invalid := strings.Replace(minimalYAML, "{replicas: 1}", "{replicas: 0}", 1)
	obj, err := schemas.DecodeValid([]byte(invalid), schemas.Decode)
	if list, ok := errors.AsType[schemas.ErrorList](err); !ok || obj != nil || len(list) == 0 {
		t.Errorf("invalid job: %v, %v; want nil and its ErrorList", obj, err)
	}
}
