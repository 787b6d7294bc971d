package schemastest_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestJob(t *testing.T) {
	base := func() schemas.TrainingJob {
		return schemas.TrainingJob{
			APIVersion: schemas.APIVersion,
			Kind:       schemas.KindTrainingJob,
			Metadata:   schemas.ObjectMeta{Name: "j", Workspace: "default"},
			Spec: schemas.TrainingJobSpec{
				Framework: schemas.FrameworkPyTorch,
				Image:     "registry.local/train:1.0",
				Command:   []string{"python", "train.py"},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			},
		}
	}
	tests := map[string]struct {
		got  *schemas.TrainingJob
		want func(*schemas.TrainingJob)
	}{
		"defaults": {
			got:  schemastest.Job("j").Obj(),
			want: func(*schemas.TrainingJob) {},
		},
		"role-level methods change the last role named": {
			got: schemastest.Job("j").Framework(schemas.FrameworkMPI).
				Role("launcher", 1).CPU("1").
				Role("worker", 2).GPUs(8).Memory("64Gi").RoleCommand("mpirun").Obj(),
			want: func(j *schemas.TrainingJob) {
				j.Spec.Framework = schemas.FrameworkMPI
				j.Spec.Roles = map[string]schemas.RoleSpec{
					"launcher": {Replicas: 1, Resources: schemas.Resources{CPU: quantity("1")}},
					"worker": {Replicas: 2, Resources: schemas.Resources{GPU: 8, Memory: quantity("64Gi")},
						Command: []string{"mpirun"}},
				}
			},
		},
		"spec-level methods": {
			got: schemastest.Job("j").Pool(schemas.PoolSpot).Priority(3).MaxRestarts(2).
				Checkpoint("s3://b/p", time.Minute, 2).Timeout(time.Hour).WithoutRole("worker").Role("master", 1).Obj(),
			want: func(j *schemas.TrainingJob) {
				j.Spec.Resources = schemas.PoolSpec{Pool: schemas.PoolSpot, Priority: 3}
				j.Spec.FaultTolerance.MaxRestarts = 2
				j.Spec.Checkpoint = &schemas.CheckpointSpec{URI: "s3://b/p", Every: schemas.Duration(time.Minute), Keep: 2}
				j.Spec.Timeout = schemas.Duration(time.Hour)
				j.Spec.Roles = map[string]schemas.RoleSpec{"master": {Replicas: 1}}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			want := base()
			tt.want(&want)
			if diff := cmp.Diff(&want, tt.got, schemastest.CmpOpts); diff != "" {
				t.Errorf("Obj() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobIsValid(t *testing.T) {
	if errs := schemastest.Job("j").Obj().Validate(); errs != nil {
		t.Errorf("Job(\"j\").Obj().Validate() = %v, want nil", errs)
	}
}

func TestObjReturnsCopies(t *testing.T) {
	b := schemastest.Job("j").Env("A", "1")
	first := b.Obj()
	first.Spec.Env[0].Value = "changed"
	first.Spec.Roles["worker"] = schemas.RoleSpec{Replicas: 9}
	second := b.Obj()
	if diff := cmp.Diff(schemastest.Job("j").Env("A", "1").Obj(), second, schemastest.CmpOpts); diff != "" {
		t.Errorf("changing one Obj() changed the next (-want +got):\n%s", diff)
	}
}

func TestJSONDecodes(t *testing.T) {
	b := schemastest.Job("j").CPU("500m").Pool(schemas.PoolQuota).ForwardLogs(true)
	got, err := schemas.DecodeTrainingJob(b.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.Obj(), got, schemastest.CmpOpts); diff != "" {
		t.Errorf("DecodeTrainingJob(JSON()) (-want +got):\n%s", diff)
	}
}
