package backend_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// DLC_RESUME_FROM is spec.checkpoint.resumeFrom on a fresh start, and the workflow's own
// choice (GangParams.ResumeFrom) when it makes one.
func TestBuildGangResumeFrom(t *testing.T) {
	job := func(resume string) *schemas.TrainingJob {
		return &schemas.TrainingJob{
			Metadata: schemas.ObjectMeta{Name: "nightly-202601020200", Workspace: "ml"},
			Spec: schemas.TrainingJobSpec{
				Framework:  schemas.FrameworkCustom,
				Command:    []string{"train"},
				Roles:      map[string]schemas.RoleSpec{"worker": {Replicas: 2}},
				Checkpoint: &schemas.CheckpointSpec{URI: "s3://ckpt/nightly", ResumeFrom: resume},
			},
		}
	}
	tests := map[string]struct {
		spec, params string
		want         string
	}{
		"fresh start":                 {},
		"from the spec":               {spec: "s3://ckpt/nightly/000000000120", want: "s3://ckpt/nightly/000000000120"},
		"the workflow's choice first": {spec: "s3://ckpt/nightly/000000000120", params: "s3://ckpt/nightly/000000000300", want: "s3://ckpt/nightly/000000000300"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g, err := backend.BuildGang(job(tt.spec), backend.GangParams{
				Ref: backend.GangRef{Workspace: "ml", Job: "nightly-202601020200"}, ResumeFrom: tt.params,
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range g.Replicas {
				for _, e := range r.Env {
					if e.Name == "DLC_RESUME_FROM" {
						got = append(got, e.Value)
					}
				}
			}
			if diff := cmp.Diff([]string{tt.want, tt.want}, got); diff != "" {
				t.Errorf("DLC_RESUME_FROM of each replica (-want +got):\n%s", diff)
			}
		})
	}
}
