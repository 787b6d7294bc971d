package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A replica's end is notified, not polled for: GangChanges's channel closes once the
// replica has ended, and the observation that follows it already shows how (no
// second look is needed). For a supervisor this Backend started (it reaps it), and for
// one it adopted from an earlier worker process on the same state directory (through
// a pidfd): the second backend here never started anything, and sees the end of a
// replica whose supervisor is not its child.
func TestGangChangesClosesWhenAReplicaEnds(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		name := "started here"
		if adopted {
			name = "adopted"
		}
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			g := gangOf(t, schemas.FrameworkCustom,
				rep("worker", 0, "sh", "-c", "sleep 1; exit 3"),
				rep("worker", 1, "sleep", "600"))
			if err := b.Launch(context.Background(), g); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
			watcher := b
			if adopted {
				watcher = newBackendOn(t, b.stateDir)
			}
			changed := watcher.GangChanges(g.GangRef)
			st, err := watcher.Observe(context.Background(), g.GangRef)
			if err != nil {
				t.Fatal(err)
			}
			if st.Replicas[0].Phase != schemas.ReplicaRunning {
				t.Fatalf("before the end: %+v, want Running", st.Replicas[0])
			}
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				t.Fatal("no change notified within 30s of a replica that ends after 1s")
			}
			// The replica has really ended: its supervisor recorded the exit.
			if _, err := os.Stat(filepath.Join(b.gangDir(g.ID()), g.Replicas[0].Name, exitFile)); err != nil {
				t.Fatalf("notified, but no exit record: %v", err)
			}
			st, err = watcher.Observe(context.Background(), g.GangRef)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Replicas[0]; r.Phase != schemas.ReplicaFailed || r.ExitCode == nil || *r.ExitCode != 3 {
				t.Errorf("observed after the notice: %+v, want Failed with exit code 3", r)
			}
			if r := st.Replicas[1]; r.Phase != schemas.ReplicaRunning {
				t.Errorf("the other replica: %+v, want Running", r)
			}
		})
	}
}

// A channel taken for a gang whose replicas all run stays open: GangChanges does not
// close for nothing, and a gang it does not know gives a channel that simply waits.
func TestGangChangesStaysOpenWhileNothingChanges(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sleep", "600"))
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	changed := b.GangChanges(g.GangRef)
	unknown := b.GangChanges(backend.GangRef{Workspace: "test", Job: "never", Attempt: 1})
	testutil.Consistently(t, 500*time.Millisecond, "no notice while nothing changes", func() error {
		select {
		case <-changed:
			return errors.New("notified while the replica runs")
		case <-unknown:
			return errors.New("notified for an unknown gang")
		default:
			return nil
		}
	})
	// Stopping it is a change.
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no change notified for a stopped replica")
	}
}

// The Backend is a backend.ChangeNotifier, so WatchGang waits for its notices.
var _ backend.ChangeNotifier = (*Backend)(nil)
