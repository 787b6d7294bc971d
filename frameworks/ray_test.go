package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

func TestRayEnv(t *testing.T) {
	g := gang(schemas.FrameworkRay).role("worker", 2, 1).role("head", 1, 0).obj()
	ray := func(head string, rank int) []schemas.EnvVar {
		return []schemas.EnvVar{
			{Name: "RAY_ADDRESS", Value: "head-0.gang:6379"},
			{Name: "RAY_HEAD_IP", Value: "head-0.gang"},
			{Name: "DLC_RAY_PORT", Value: "6379"},
			{Name: "DLC_RAY_HEAD", Value: head},
			{Name: "MASTER_ADDR", Value: "head-0.gang"},
			{Name: "MASTER_PORT", Value: "6379"},
			{Name: "WORLD_SIZE", Value: "3"},
			{Name: "RANK", Value: itoa(rank)},
		}
	}
	tests := map[string]struct {
		replica backend.ReplicaSpec
		want    []schemas.EnvVar
	}{
		// The head is rank 0 although the worker role leads RankOrder.
		"head is rank 0": {replica: replica(g, "head", 0), want: ray("true", 0)},
		"worker 0":       {replica: replica(g, "worker", 0), want: ray("false", 1)},
		"worker 1":       {replica: replica(g, "worker", 1), want: ray("false", 2)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EnvFor(g, tc.replica, ports)
			if err != nil {
				t.Fatalf("EnvFor: %v", err)
			}
			if diff := cmp.Diff(append(tc.want, common(tc.replica)...), got); diff != "" {
				t.Errorf("EnvFor mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Kubernetes gives Ray's GCS port its conventional number.
func TestDefaultPort(t *testing.T) {
	if got := DefaultPort(PortRayGCS); got != 6379 {
		t.Errorf("DefaultPort(ray-gcs) = %d, want 6379", got)
	}
	if got := DefaultPort(PortRendezvous); got != 0 {
		t.Errorf("DefaultPort(rendezvous) = %d, want 0", got)
	}
}
