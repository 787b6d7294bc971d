package schemas_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

func TestValidateElasticAndSecrets(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*schemas.TrainingJob)
		want   []string
	}{
		"elastic ok": {func(j *schemas.TrainingJob) { j.Spec.Elastic = &schemas.ElasticSpec{MinReplicas: 1, MaxReplicas: 4} }, []string{}},
		"elastic min above max": {func(j *schemas.TrainingJob) { j.Spec.Elastic = &schemas.ElasticSpec{MinReplicas: 4, MaxReplicas: 2} },
			[]string{"spec.elastic.minReplicas"}},
		"elastic excludes the replicas": {func(j *schemas.TrainingJob) { j.Spec.Elastic = &schemas.ElasticSpec{MinReplicas: 2, MaxReplicas: 4} },
			[]string{"spec.elastic"}},
		"elastic needs pytorch": {func(j *schemas.TrainingJob) {
			j.Spec.Framework = schemas.FrameworkCustom
			j.Spec.Elastic = &schemas.ElasticSpec{MinReplicas: 1, MaxReplicas: 2}
		}, []string{"spec.elastic"}},
		"secret names": {func(j *schemas.TrainingJob) { j.Spec.EnvFromSecrets = []string{"s3-creds", "Bad_Name"} },
			[]string{"spec.envFromSecrets[1]"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := schemastest.Job("j").Mutate(tc.mutate).Obj()
			if diff := cmp.Diff(tc.want, job.Validate().Fields()); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}
