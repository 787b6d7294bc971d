package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

func TestShardEnv(t *testing.T) {
	for _, f := range []schemas.Framework{schemas.FrameworkPreprocess, schemas.FrameworkInference} {
		g := gang(f).role("worker", 12, 1).obj()
		for _, i := range []int{0, 3, 11} {
			got, err := EnvFor(g, replica(g, "worker", i), fakeEndpoints{})
			if err != nil {
				t.Fatalf("%s: EnvFor: %v", f, err)
			}
			want := append([]schemas.EnvVar{
				{Name: "DLC_SHARD_INDEX", Value: itoa(i)},
				{Name: "DLC_SHARD_COUNT", Value: "12"},
				// A Kubernetes Indexed Job's pod i has JOB_COMPLETION_INDEX=i.
				{Name: "JOB_COMPLETION_INDEX", Value: itoa(i)},
			}, common(replica(g, "worker", i))...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s worker-%d: EnvFor mismatch (-want +got):\n%s", f, i, diff)
			}
		}
	}
}
