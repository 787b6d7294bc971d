package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

func TestRayEnv(t *testing.T) {
	g := gang(schemas.FrameworkRay).role("worker", 2, 1).role("head", 1, 0).obj()
	ray := func(head string) []schemas.EnvVar {
		return []schemas.EnvVar{
			{Name: "RAY_ADDRESS", Value: "head-0.gang:6379"},
			{Name: "RAY_HEAD_IP", Value: "head-0.gang"},
			{Name: "DLC_RAY_PORT", Value: "6379"},
			{Name: "DLC_RAY_HEAD", Value: head},
		}
	}
	tests := map[string]struct {
		replica backend.ReplicaSpec
		want    []schemas.EnvVar
	}{
		"head":   {replica: replica(g, "head", 0), want: ray("true")},
		"worker": {replica: replica(g, "worker", 1), want: ray("false")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EnvFor(g, tc.replica, ports)
			if err != nil {
				t.Fatalf("EnvFor: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EnvFor mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
