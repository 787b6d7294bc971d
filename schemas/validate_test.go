package schemas_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

const (
	dnsLabelMsg   = "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	envNameMsg    = "must be a C identifier: letters, digits and '_', not starting with a digit"
	checkpointMsg = "must be s3://bucket/prefix, with a bucket name of 3-63 lowercase letters, digits, '.' and '-' and a non-empty prefix"
	roleNameMsg   = "role name must be a DNS label of at most 63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit"
	labelKeyMsg   = "key must be [prefix/]name, where name is at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	labelValueMsg = "value must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	frameworksMsg = "must be one of pytorch, deepspeed, megatron, tensorflow, mpi, xgboost, paddle, ray, slurm, preprocess, inference, custom"
)

func job() *schemastest.JobBuilder { return schemastest.Job("j") }

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		job  *schemas.TrainingJob
		want schemas.ErrorList
	}{
		// Valid jobs.
		"builder default":          {job: job().Obj()},
		"fixture with every field": {job: validYAMLJob()},
		"empty fields that Default fills": {
			job: job().Workspace("").Pool("").Mutate(func(j *schemas.TrainingJob) { j.Spec.Logs.Forward = nil }).Obj(),
		},
		"longest name and workspace": {
			job: job().Name(strings.Repeat("a", 50)).Workspace(strings.Repeat("b", 40)).Obj(),
		},
		"pytorch master and workers": {job: job().Role("master", 1).Role("worker", 8).Obj()},
		"deepspeed":                  {job: job().Framework(schemas.FrameworkDeepSpeed).Role("master", 1).Obj()},
		"megatron":                   {job: job().Framework(schemas.FrameworkMegatron).Role("worker", 64).Obj()},
		"tensorflow with every role": {job: job().Framework(schemas.FrameworkTensorFlow).Role("chief", 1).Role("ps", 2).Role("worker", 4).Role("evaluator", 1).Obj()},
		// TFJob's Master is its Chief under an older name.
		"tensorflow master as chief": {job: job().Framework(schemas.FrameworkTensorFlow).Role("master", 1).Role("ps", 1).Role("worker", 2).Obj()},
		"mpi launcher and workers":   {job: job().Framework(schemas.FrameworkMPI).Role("launcher", 1).Role("worker", 4).Obj()},
		"xgboost master and workers": {job: job().Framework(schemas.FrameworkXGBoost).Role("master", 1).Role("worker", 3).Obj()},
		"ray head alone":             {job: job().Framework(schemas.FrameworkRay).WithoutRoles().Role("head", 1).Obj()},
		"slurm launcher and workers": {job: job().Framework(schemas.FrameworkSlurm).Role("launcher", 1).Role("worker", 4).Obj()},
		"slurm launcher alone":       {job: job().Framework(schemas.FrameworkSlurm).WithoutRoles().Role("launcher", 1).Obj()},
		"preprocess shards":          {job: job().Framework(schemas.FrameworkPreprocess).Role("worker", 16).Obj()},
		"inference shards":           {job: job().Framework(schemas.FrameworkInference).Role("worker", 1024).Obj()},
		"custom with any role names": {job: job().Framework(schemas.FrameworkCustom).Role("server", 2).Role("client", 16).Obj()},
		"no job command, every role has one": {
			job: job().Command().Role("master", 1).RoleCommand("python", "master.py").Role("worker", 2).RoleCommand("python", "worker.py").Obj(),
		},
		"most replicas and gpus": {job: job().Role("worker", 1024).GPUs(64).Obj()},
		"priority and restart bounds": {
			job: job().Priority(-1000).MaxRestarts(100).Obj(),
		},
		"local and s3 data": {
			job: job().Data("a", "/mnt/data/a", "/a").Data("b", "relative/b", "").Data("c", "s3://bucket", "/c").Data("d", "s3://my.bucket-1/x/y/", "/d").Obj(),
		},
		"labels with prefixes and empty values": {
			job: job().Label("app.kubernetes.io/name", "x").Label("empty", "").Label("A_b.c-D", "v_1.2-3").Obj(),
		},
		"valid tolerations": {
			job: job().Toleration(schemas.Toleration{Operator: "Exists"}).
				Toleration(schemas.Toleration{Key: "gpu", Value: "true", Effect: "NoExecute"}).
				Toleration(schemas.Toleration{Key: "example.com/spot", Operator: "Equal", Value: "yes", Effect: "PreferNoSchedule"}).Obj(),
		},

		// apiVersion, kind, metadata.
		"wrong apiVersion": {
			job:  job().Mutate(func(j *schemas.TrainingJob) { j.APIVersion = "opendlc.io/v1" }).Obj(),
			want: schemas.ErrorList{{Field: "apiVersion", Detail: "must be opendlc.io/v1alpha1"}},
		},
		"missing apiVersion and kind": {
			job: job().Mutate(func(j *schemas.TrainingJob) { j.APIVersion, j.Kind = "", "" }).Obj(),
			want: schemas.ErrorList{
				{Field: "apiVersion", Detail: "required"},
				{Field: "kind", Detail: "required"},
			},
		},
		"wrong kind": {
			job:  job().Mutate(func(j *schemas.TrainingJob) { j.Kind = "Experiment" }).Obj(),
			want: schemas.ErrorList{{Field: "kind", Detail: "must be TrainingJob"}},
		},
		"missing name": {
			job:  job().Name("").Obj(),
			want: schemas.ErrorList{{Field: "metadata.name", Detail: "required"}},
		},
		"name too long": {
			job:  job().Name(strings.Repeat("a", 51)).Obj(),
			want: schemas.ErrorList{{Field: "metadata.name", Detail: "must be at most 50 characters"}},
		},
		"names that are not DNS labels": {
			job:  job().Name("Res_Net").Workspace("-vision").Obj(),
			want: schemas.ErrorList{{Field: "metadata.name", Detail: dnsLabelMsg}, {Field: "metadata.workspace", Detail: dnsLabelMsg}},
		},
		"workspace too long": {
			job:  job().Workspace(strings.Repeat("w", 41)).Obj(),
			want: schemas.ErrorList{{Field: "metadata.workspace", Detail: "must be at most 40 characters"}},
		},
		"bad labels": {
			job: job().Label("bad key", "v").Label("Example.com/x", "v").Label("/x", "v").
				Label("ok", "bad value").Label("long", strings.Repeat("v", 64)).Label(strings.Repeat("k", 64), "v").Obj(),
			want: schemas.ErrorList{
				{Field: "metadata.labels.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", Detail: labelKeyMsg},
				{Field: "metadata.labels.long", Detail: labelValueMsg},
				{Field: "metadata.labels.ok", Detail: labelValueMsg},
				{Field: `metadata.labels["/x"]`, Detail: "key prefix must be a DNS subdomain of at most 253 characters"},
				{Field: `metadata.labels["Example.com/x"]`, Detail: "key prefix must be a DNS subdomain of at most 253 characters"},
				{Field: `metadata.labels["bad key"]`, Detail: labelKeyMsg},
			},
		},
		"too many labels and annotations": {
			job: job().Mutate(func(j *schemas.TrainingJob) {
				j.Metadata.Labels, j.Metadata.Annotations = map[string]string{}, map[string]string{}
				for i := range 65 {
					j.Metadata.Labels[fmt.Sprint("l", i)] = "v"
					j.Metadata.Annotations[fmt.Sprint("a", i)] = "v"
				}
			}).Obj(),
			want: schemas.ErrorList{
				{Field: "metadata.annotations", Detail: "must have at most 64 entries"},
				{Field: "metadata.labels", Detail: "must have at most 64 entries"},
			},
		},
		"bad annotations": {
			job: job().Annotation("opendlc.io/ok", strings.Repeat("é", 4096)).Annotation("x y", "v").
				Annotation("long", strings.Repeat("v", 4097)).Obj(),
			want: schemas.ErrorList{
				{Field: "metadata.annotations.long", Detail: "value must be at most 4096 characters"},
				{Field: `metadata.annotations["x y"]`, Detail: labelKeyMsg},
			},
		},

		// spec.
		"missing framework": {
			job:  job().Framework("").Obj(),
			want: schemas.ErrorList{{Field: "spec.framework", Detail: "required"}},
		},
		"unknown framework": {
			job:  job().Framework("jax").Obj(),
			want: schemas.ErrorList{{Field: "spec.framework", Detail: frameworksMsg}},
		},
		"image too long": {
			job:  job().Image(strings.Repeat("i", 513)).Obj(),
			want: schemas.ErrorList{{Field: "spec.image", Detail: "must be at most 512 characters"}},
		},
		"no command and a role without one": {
			job:  job().Command().Role("master", 1).RoleCommand("python", "m.py").Obj(),
			want: schemas.ErrorList{{Field: "spec.command", Detail: "required unless every role sets its own command"}},
		},
		"command and args bounds": {
			job: job().Command(append(make([]string, 256), "x")...).Args("ok", strings.Repeat("a", 4097)).
				RoleCommand(make([]string, 257)...).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.args[1]", Detail: "must be at most 4096 characters"},
				{Field: "spec.command", Detail: "must have at most 256 items"},
				{Field: "spec.roles.worker.command", Detail: "must have at most 256 items"},
			},
		},
		"env": {
			job: job().Env("OK_1", "").Env("1BAD", "v").Env("OK_1", "again").Env("", "v").Env("A-B", "v").
				RoleEnv("X", "1").RoleEnv("X", "2").Obj(),
			want: schemas.ErrorList{
				{Field: "spec.env[1].name", Detail: envNameMsg},
				{Field: "spec.env[2].name", Detail: `duplicate name "OK_1" (first at spec.env[0])`},
				{Field: "spec.env[3].name", Detail: "required"},
				{Field: "spec.env[4].name", Detail: envNameMsg},
				{Field: "spec.roles.worker.env[1].name", Detail: `duplicate name "X" (first at spec.roles.worker.env[0])`},
			},
		},
		"env bounds": {
			job: job().Mutate(func(j *schemas.TrainingJob) {
				for i := range 129 {
					j.Spec.Env = append(j.Spec.Env, schemas.EnvVar{Name: fmt.Sprint("V", i)})
				}
				j.Spec.Env[0].Value = strings.Repeat("v", 32769)
				j.Spec.Env[1].Name = strings.Repeat("N", 257)
			}).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.env", Detail: "must have at most 128 items"},
				{Field: "spec.env[0].value", Detail: "must be at most 32768 characters"},
				{Field: "spec.env[1].name", Detail: "must be at most 256 characters"},
			},
		},
		"workingDir too long": {
			job:  job().WorkingDir("/" + strings.Repeat("d", 1024)).Obj(),
			want: schemas.ErrorList{{Field: "spec.workingDir", Detail: "must be at most 1024 characters"}},
		},

		// roles.
		"no roles": {
			job:  job().WithoutRoles().Obj(),
			want: schemas.ErrorList{{Field: "spec.roles", Detail: "must have at least 1 role"}},
		},
		"too many roles": {
			job: job().Framework(schemas.FrameworkCustom).Mutate(func(j *schemas.TrainingJob) {
				for i := range 17 {
					j.Spec.Roles[fmt.Sprint("r", i)] = schemas.RoleSpec{Replicas: 1}
				}
			}).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles", Detail: "must have at most 16 roles"}},
		},
		"role names that are not DNS labels": {
			job: job().Framework(schemas.FrameworkCustom).Role("Worker", 1).Role("a.b", 1).Role(strings.Repeat("r", 64), 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.Worker", Detail: roleNameMsg},
				{Field: "spec.roles.rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr", Detail: roleNameMsg},
				{Field: `spec.roles["a.b"]`, Detail: roleNameMsg},
			},
		},
		"replicas out of range": {
			job: job().Role("master", 0).Role("worker", 1025).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.master.replicas", Detail: "must be >= 1"},
				{Field: "spec.roles.worker.replicas", Detail: "must be <= 1024"},
			},
		},
		"pytorch: unknown role and two masters": {
			job: job().Role("master", 2).Role("ps", 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.master.replicas", Detail: "must be <= 1 for framework pytorch"},
				{Field: "spec.roles.ps", Detail: "not a role of framework pytorch; must be one of master, worker"},
			},
		},
		"tensorflow: two chiefs and two evaluators": {
			job: job().Framework(schemas.FrameworkTensorFlow).Role("chief", 2).Role("evaluator", 2).Role("launcher", 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.chief.replicas", Detail: "must be <= 1 for framework tensorflow"},
				{Field: "spec.roles.evaluator.replicas", Detail: "must be <= 1 for framework tensorflow"},
				{Field: "spec.roles.launcher", Detail: "not a role of framework tensorflow; must be one of chief, master, ps, worker, evaluator"},
			},
		},
		// As TFJob's webhook: at most one Chief or Master.
		"tensorflow: chief and master, two masters": {
			job: job().Framework(schemas.FrameworkTensorFlow).Role("chief", 1).Role("master", 2).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.master", Detail: "is another name for role chief of framework tensorflow: set one of them, not both"},
				{Field: "spec.roles.master.replicas", Detail: "must be <= 1 for framework tensorflow"},
			},
		},
		"mpi: missing launcher": {
			job:  job().Framework(schemas.FrameworkMPI).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.launcher", Detail: "required for framework mpi, with 1 replica"}},
		},
		"mpi: two launchers": {
			job:  job().Framework(schemas.FrameworkMPI).Role("launcher", 2).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.launcher.replicas", Detail: "must be 1 for framework mpi"}},
		},
		"mpi: zero launchers is reported once": {
			job:  job().Framework(schemas.FrameworkMPI).Role("launcher", 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.launcher.replicas", Detail: "must be >= 1"}},
		},
		"xgboost: two masters": {
			job:  job().Framework(schemas.FrameworkXGBoost).Role("master", 2).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.master.replicas", Detail: "must be <= 1 for framework xgboost"}},
		},
		"ray: missing head": {
			job:  job().Framework(schemas.FrameworkRay).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.head", Detail: "required for framework ray, with 1 replica"}},
		},
		"ray: two heads and a master": {
			job: job().Framework(schemas.FrameworkRay).Role("head", 2).Role("master", 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.head.replicas", Detail: "must be 1 for framework ray"},
				{Field: "spec.roles.master", Detail: "not a role of framework ray; must be one of head, worker"},
			},
		},
		"slurm: missing launcher": {
			job:  job().Framework(schemas.FrameworkSlurm).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.launcher", Detail: "required for framework slurm, with 1 replica"}},
		},
		"slurm: two launchers and a master": {
			job: job().Framework(schemas.FrameworkSlurm).Role("launcher", 2).Role("master", 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.launcher.replicas", Detail: "must be 1 for framework slurm"},
				{Field: "spec.roles.master", Detail: "not a role of framework slurm; must be one of launcher, worker"},
			},
		},
		"preprocess: worker only": {
			job:  job().Framework(schemas.FrameworkPreprocess).Role("master", 1).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.master", Detail: "not a role of framework preprocess; must be one of worker"}},
		},
		"inference: worker only": {
			job:  job().Framework(schemas.FrameworkInference).WithoutRoles().Role("server", 2).Obj(),
			want: schemas.ErrorList{{Field: "spec.roles.server", Detail: "not a role of framework inference; must be one of worker"}},
		},
		"unknown framework skips role checks": {
			job:  job().Framework("jax").Role("anything", 1).Obj(),
			want: schemas.ErrorList{{Field: "spec.framework", Detail: frameworksMsg}},
		},
		"resources": {
			job: job().Role("master", 1).CPU("0").Memory("-1Gi").GPUs(-1).Role("worker", 1).CPU("-500m").Memory("0").GPUs(65).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.master.resources.cpu", Detail: "must be > 0"},
				{Field: "spec.roles.master.resources.gpu", Detail: "must be >= 0"},
				{Field: "spec.roles.master.resources.memory", Detail: "must be > 0"},
				{Field: "spec.roles.worker.resources.cpu", Detail: "must be > 0"},
				{Field: "spec.roles.worker.resources.gpu", Detail: "must be <= 64"},
				{Field: "spec.roles.worker.resources.memory", Detail: "must be > 0"},
			},
		},
		// Finding 5 of issue 33: quantities past int64 counted as 0 or -1 CPU in the
		// workspace quota. Each is refused, naming the field.
		"resources past any node": {
			job: job().Role("master", 1).CPU("1e400").Memory("1e400").
				Role("worker", 1).CPU("9223372036854775807").Memory("64.1Ti").Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.master.resources.cpu", Detail: "must be at most 4096 (cores): more than any node holds"},
				{Field: "spec.roles.master.resources.memory", Detail: "must be at most 64Ti (bytes): more than any node holds"},
				{Field: "spec.roles.worker.resources.cpu", Detail: "must be at most 4096 (cores): more than any node holds"},
				{Field: "spec.roles.worker.resources.memory", Detail: "must be at most 64Ti (bytes): more than any node holds"},
			},
		},
		"resources at the bounds": {
			job: job().Role("worker", 1024).CPU("4096").Memory("64Ti").GPUs(64).Obj(),
		},
		"node selector": {
			job: job().NodeSelector("kubernetes.io/arch", "amd64").NodeSelector("bad key", "v").NodeSelector("k", "bad value").Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.worker.nodeSelector.k", Detail: labelValueMsg},
				{Field: `spec.roles.worker.nodeSelector["bad key"]`, Detail: labelKeyMsg},
			},
		},
		"tolerations": {
			job: job().
				Toleration(schemas.Toleration{Key: "k", Operator: "In", Effect: "Evict"}).
				Toleration(schemas.Toleration{Key: "k", Operator: "Exists", Value: "v"}).
				Toleration(schemas.Toleration{Value: "v"}).
				Toleration(schemas.Toleration{Key: "bad key", Value: "bad value"}).
				Mutate(func(j *schemas.TrainingJob) {
					r := j.Spec.Roles["worker"]
					for range 29 {
						r.Tolerations = append(r.Tolerations, schemas.Toleration{Operator: "Exists"})
					}
					j.Spec.Roles["worker"] = r
				}).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.roles.worker.tolerations", Detail: "must have at most 32 items"},
				{Field: "spec.roles.worker.tolerations[0].effect", Detail: "must be one of NoSchedule, PreferNoSchedule, NoExecute"},
				{Field: "spec.roles.worker.tolerations[0].operator", Detail: "must be one of Exists, Equal"},
				{Field: "spec.roles.worker.tolerations[1].value", Detail: "must be empty when operator is Exists"},
				{Field: "spec.roles.worker.tolerations[2].operator", Detail: "must be Exists when key is empty"},
				{Field: "spec.roles.worker.tolerations[3].key", Detail: strings.TrimPrefix(labelKeyMsg, "key ")},
				{Field: "spec.roles.worker.tolerations[3].value", Detail: strings.TrimPrefix(labelValueMsg, "value ")},
			},
		},

		// resources, fault tolerance, durations.
		"unknown pool": {
			job:  job().Pool("reserved").Obj(),
			want: schemas.ErrorList{{Field: "spec.resources.pool", Detail: "must be one of quota, public, spot, idle"}},
		},
		"priority out of range": {
			job:  job().Priority(1001).Obj(),
			want: schemas.ErrorList{{Field: "spec.resources.priority", Detail: "must be <= 1000"}},
		},
		"negative priority out of range": {
			job:  job().Priority(-1001).Obj(),
			want: schemas.ErrorList{{Field: "spec.resources.priority", Detail: "must be >= -1000"}},
		},
		"maxRestarts out of range": {
			job:  job().MaxRestarts(101).Obj(),
			want: schemas.ErrorList{{Field: "spec.faultTolerance.maxRestarts", Detail: "must be <= 100"}},
		},
		"negative maxRestarts": {
			job:  job().MaxRestarts(-1).Obj(),
			want: schemas.ErrorList{{Field: "spec.faultTolerance.maxRestarts", Detail: "must be >= 0"}},
		},
		"negative durations": {
			job: job().HangTimeout(-time.Second).HealthCheck(-time.Minute).Timeout(-time.Hour).
				Checkpoint("s3://ckpt/j", -time.Minute, 1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.checkpoint.every", Detail: "must not be negative"},
				{Field: "spec.faultTolerance.hangTimeout", Detail: "must not be negative"},
				{Field: "spec.healthCheck.timeout", Detail: "must not be negative"},
				{Field: "spec.timeout", Detail: "must not be negative"},
			},
		},

		// checkpoint and data.
		"checkpoint uri": {
			job: job().Checkpoint("gs://ckpt/j", 0, -1).Obj(),
			want: schemas.ErrorList{
				{Field: "spec.checkpoint.keep", Detail: "must be >= 0"},
				{Field: "spec.checkpoint.uri", Detail: checkpointMsg},
			},
		},
		"checkpoint uri required": {
			job:  job().Checkpoint("", 0, 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.checkpoint.uri", Detail: "required"}},
		},
		"checkpoint uri without a prefix": {
			job:  job().Checkpoint("s3://ckpt/", 0, 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.checkpoint.uri", Detail: checkpointMsg}},
		},
		"checkpoint bucket too short": {
			job:  job().Checkpoint("s3://ab/j", 0, 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.checkpoint.uri", Detail: checkpointMsg}},
		},
		"checkpoint bucket too long": {
			job:  job().Checkpoint("s3://"+strings.Repeat("b", 64)+"/j", 0, 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.checkpoint.uri", Detail: checkpointMsg}},
		},
		"checkpoint bucket with capitals": {
			job:  job().Checkpoint("s3://Ckpt/j", 0, 0).Obj(),
			want: schemas.ErrorList{{Field: "spec.checkpoint.uri", Detail: checkpointMsg}},
		},
		"buckets of 3 and 63 characters": {
			job: job().Checkpoint("s3://abc/j", 0, 0).Data("d", "s3://"+strings.Repeat("b", 63)+"/x", "").Obj(),
		},
		"data": {
			job: job().
				Data("imagenet", "s3://datasets/imagenet", "/data").
				Data("imagenet", "gs://datasets/imagenet", "/data/").
				Data("Bad_Name", "s3://ab/x", "relative").
				Data("", "", "").
				Data("ok", "s3://"+strings.Repeat("b", 64), "").
				Data("ok2", "s3://Bucket/x", "").Obj(),
			want: schemas.ErrorList{
				{Field: "spec.data[1].mountPath", Detail: `duplicate mount path "/data/" (first at spec.data[0])`},
				{Field: "spec.data[1].name", Detail: `duplicate name "imagenet" (first at spec.data[0])`},
				{Field: "spec.data[1].uri", Detail: "must be s3://bucket/prefix or a local path"},
				{Field: "spec.data[2].mountPath", Detail: "must be an absolute path"},
				{Field: "spec.data[2].name", Detail: dnsLabelMsg},
				{Field: "spec.data[2].uri", Detail: `bucket name "ab" must be 3-63 characters`},
				{Field: "spec.data[3].name", Detail: "required"},
				{Field: "spec.data[3].uri", Detail: "required unless pvc is set"},
				{Field: "spec.data[4].uri", Detail: `bucket name "` + strings.Repeat("b", 64) + `" must be 3-63 characters`},
				{Field: "spec.data[5].uri", Detail: `bucket name "Bucket" must be lowercase letters, digits, '.' and '-', starting and ending with a letter or digit`},
			},
		},
		"too many data sources": {
			job: job().Mutate(func(j *schemas.TrainingJob) {
				for i := range 33 {
					j.Spec.Data = append(j.Spec.Data, schemas.DataSource{Name: fmt.Sprint("d", i), URI: "/d"})
				}
			}).Obj(),
			want: schemas.ErrorList{{Field: "spec.data", Detail: "must have at most 32 items"}},
		},

		"every problem at once, sorted": {
			job: job().Name("Bad").Framework("jax").Replicas(0).GPUs(-1).Checkpoint("gs://x/y", 0, 0).
				Priority(2000).Env("1", "").Data("d", "http://x", "").Obj(),
			want: schemas.ErrorList{
				{Field: "metadata.name", Detail: dnsLabelMsg},
				{Field: "spec.checkpoint.uri", Detail: checkpointMsg},
				{Field: "spec.data[0].uri", Detail: "must be s3://bucket/prefix or a local path"},
				{Field: "spec.env[0].name", Detail: envNameMsg},
				{Field: "spec.framework", Detail: frameworksMsg},
				{Field: "spec.resources.priority", Detail: "must be <= 1000"},
				{Field: "spec.roles.worker.replicas", Detail: "must be >= 1"},
				{Field: "spec.roles.worker.resources.gpu", Detail: "must be >= 0"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tt.job, tt.want)
		})
	}
}

// checkValidate checks that v.Validate() reports want, and never an empty non-nil list.
func checkValidate(t *testing.T, v interface{ Validate() schemas.ErrorList }, want schemas.ErrorList) {
	t.Helper()
	got := v.Validate()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
	if got != nil && len(got) == 0 {
		t.Errorf("Validate returned an empty non-nil list")
	}
}

// checkValidateMessages checks the messages of v.Validate()'s errors, each with its
// field path, in order.
func checkValidateMessages(t *testing.T, v interface{ Validate() schemas.ErrorList }, want []string) {
	t.Helper()
	var got []string
	for _, e := range v.Validate() {
		got = append(got, e.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	tests := map[string]struct {
		job  *schemas.TrainingJob
		want *schemas.TrainingJob
	}{
		"fills empty fields": {
			job: job().Workspace("").Pool("").Mutate(func(j *schemas.TrainingJob) {
				j.Spec.Logs.Forward = nil
				j.Spec.HealthCheck.Enabled = true
			}).Obj(),
			want: job().Workspace("default").Pool(schemas.PoolQuota).ForwardLogs(true).HealthCheck(5 * time.Minute).Obj(),
		},
		"keeps set fields": {
			job:  job().Workspace("nlp").Pool(schemas.PoolSpot).ForwardLogs(false).HealthCheck(time.Minute).Obj(),
			want: job().Workspace("nlp").Pool(schemas.PoolSpot).ForwardLogs(false).HealthCheck(time.Minute).Obj(),
		},
		"no health check timeout when disabled": {
			job:  job().Pool("").Obj(),
			want: job().Pool(schemas.PoolQuota).ForwardLogs(true).Obj(),
		},
		"is idempotent": {
			job:  job().Pool(schemas.PoolQuota).ForwardLogs(true).Obj(),
			want: job().Pool(schemas.PoolQuota).ForwardLogs(true).Obj(),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.job.Default()
			if diff := cmp.Diff(tt.want, tt.job, schemastest.CmpOpts); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObject(t *testing.T) {
	j := job().Obj()
	var obj schemas.Object = j
	if got := obj.GetKind(); got != schemas.KindTrainingJob {
		t.Errorf("GetKind() = %q, want %q", got, schemas.KindTrainingJob)
	}
	obj.GetMeta().Name = "renamed"
	if diff := cmp.Diff("renamed", j.Metadata.Name); diff != "" {
		t.Errorf("GetMeta does not return the job's metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]schemas.Kind{schemas.KindExperiment, schemas.KindNotificationRule, schemas.KindPipeline, schemas.KindPipelineTemplate, schemas.KindSchedule, schemas.KindTrainingJob, schemas.KindTrigger}, schemas.Kinds()); diff != "" {
		t.Errorf("Kinds() (-want +got):\n%s", diff)
	}
	if _, ok := schemas.NewObject(schemas.KindTrainingJob).(*schemas.TrainingJob); !ok {
		t.Errorf("NewObject(TrainingJob) is not a *TrainingJob")
	}
	if got := schemas.NewObject("Nope"); got != nil {
		t.Errorf("NewObject(Nope) = %v, want nil", got)
	}
}

// TestFiveMistakes checks testdata/five-mistakes.yaml, the example in the docs of what
// validation reports: it decodes, and Validate finds exactly its five mistakes.
func TestFiveMistakes(t *testing.T) {
	job, err := schemas.DecodeTrainingJob(readFile(t, "testdata/five-mistakes.yaml"))
	if err != nil {
		t.Fatalf("DecodeTrainingJob: %v", err)
	}
	want := schemas.ErrorList{
		{Field: "metadata.name", Detail: dnsLabelMsg},
		{Field: "spec.checkpoint.uri", Detail: checkpointMsg},
		{Field: "spec.framework", Detail: frameworksMsg},
		{Field: "spec.roles.worker.replicas", Detail: "must be >= 1"},
		{Field: "spec.roles.worker.resources.gpu", Detail: "must be >= 0"},
	}
	got := job.Validate()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	t.Logf("five-mistakes.yaml:\n%v", got)
}

// TestTestdataValid checks that the valid fixtures decode and validate cleanly.
func TestTestdataValid(t *testing.T) {
	tests := map[string]struct {
		file string
	}{
		"YAML with every field": {file: "testdata/valid.yaml"},
		"minimal JSON":          {file: "testdata/minimal.json"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obj, err := schemas.Decode(readFile(t, tt.file))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(schemas.ErrorList(nil), obj.Validate()); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}
