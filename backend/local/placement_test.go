package local

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// A gang that needs more GPUs than the host has cannot fit even with every GPU free:
// Launch says so (Unschedulable, not InsufficientResources) and starts nothing.
func TestLaunchRefusesAGangLargerThanTheHost(t *testing.T) {
	b := newBackend(t, WithGPUs(4))
	release := filepath.Join(t.TempDir(), "release")
	g := gangOf(t, schemas.FrameworkCustom, gpuRep(0, 4, release), gpuRep(1, 2, release))
	err := b.Launch(context.Background(), g)
	if !errors.Is(err, backend.ErrUnschedulable) || errors.Is(err, backend.ErrInsufficientResources) ||
		err.Error() != "cannot fit even with every GPU free: the gang needs 6 GPUs, this host has 4" {
		t.Fatalf("Launch: %v, want an Unschedulable error", err)
	}
	st, err := b.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaPending {
			t.Errorf("replica %s is %s, want Pending (not started)", r.Name, r.Phase)
		}
	}
	// A gang starts whole or not at all here: no placement timeout.
	if got := backend.PlacementTimeoutFor(b, schemas.PoolQuota); got != 0 {
		t.Errorf("placement timeout %s, want none", got)
	}
}
