//go:build linux

package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// newBackend returns a Backend on a fresh state directory.
func newBackend(t *testing.T, opts ...Option) *Backend {
	t.Helper()
	b, err := New(append([]Option{WithStateDir(t.TempDir()), WithNode("test-node")}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// gangOf builds a gang named after the test, naming its replicas deterministically.
func gangOf(t *testing.T, fw schemas.Framework, replicas ...backend.ReplicaSpec) backend.GangSpec {
	job := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	g := backend.GangSpec{
		GangRef:   backend.GangRef{Workspace: "test", Job: job, Attempt: 1},
		Framework: fw,
	}
	for _, r := range replicas {
		r.Name = g.ReplicaName(r.Role, r.Index)
		g.Replicas = append(g.Replicas, r)
	}
	return g
}

// rep is a replica running argv.
func rep(role string, index int, argv ...string) backend.ReplicaSpec {
	return backend.ReplicaSpec{Role: role, Index: index, Command: argv}
}

// launch launches g and stops it when the test ends, so no process outlives a test.
func launch(t *testing.T, b *Backend, g backend.GangSpec) {
	t.Helper()
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch: %v", err)
	}
}

// waitFor observes the gang until every replica satisfies ok, and returns that status.
func waitFor(t *testing.T, b *Backend, ref backend.GangRef, what string, ok func(schemas.ReplicaStatus) bool) backend.GangStatus {
	t.Helper()
	var st backend.GangStatus
	testutil.Eventually(t, 20*time.Second, what, func() bool {
		var err error
		st, err = b.Observe(context.Background(), ref)
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
		for _, r := range st.Replicas {
			if !ok(r) {
				return false
			}
		}
		return true
	})
	return st
}

func terminal(r schemas.ReplicaStatus) bool { return r.Phase.Terminal() }
func running(r schemas.ReplicaStatus) bool  { return r.Phase == schemas.ReplicaRunning }

// logs follows a replica's whole output after afterSeq.
func logs(t *testing.T, b *Backend, ref backend.GangRef, replica string, afterSeq int64) []backend.LogLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []backend.LogLine
	err := b.FollowLogs(ctx, ref, replica, afterSeq, func(l backend.LogLine) error {
		out = append(out, l)
		return nil
	})
	if err != nil {
		t.Fatalf("FollowLogs(%s): %v", replica, err)
	}
	return out
}

var errEnough = errors.New("enough")

// firstLines follows a running replica until it has printed n lines.
func firstLines(t *testing.T, b *Backend, ref backend.GangRef, replica string, n int) []backend.LogLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []backend.LogLine
	err := b.FollowLogs(ctx, ref, replica, 0, func(l backend.LogLine) error {
		out = append(out, l)
		if len(out) == n {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("FollowLogs(%s) = %v after %d lines, want %d lines", replica, err, len(out), n)
	}
	return out
}

// replicaSessions lists, by marker value, the sessions of the live processes whose
// environment marks them as started for a state directory under stateDir. A replica
// started once is one session: its supervisor's.
func replicaSessions(t *testing.T, stateDir string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, p := range liveProcs() {
		v := markerDir(p.pid)
		if strings.HasPrefix(v, stateDir+string(filepath.Separator)) && !slices.Contains(out[v], p.sid) {
			out[v] = append(out[v], p.sid)
		}
	}
	return out
}

// pidOf reads a replica's pid file: its supervisor's pid.
func pidOf(t *testing.T, b *Backend, g backend.GangSpec, replica string) int {
	t.Helper()
	pid := readPid(filepath.Join(b.gangDir(g.ID()), replica))
	if pid == 0 {
		t.Fatalf("no pid recorded for %s", replica)
	}
	return pid
}

// workerEnv, when set, makes a test re-executed by startWorker act as a worker process
// (see actAsWorker). It holds a workerSpec as JSON.
const workerEnv = "OPENDLC_LOCAL_TEST_WORKER"

// workerSpec is what a worker process does: launch Gang on Dir, and follow the first
// Follow lines of each replica.
type workerSpec struct {
	Dir    string           `json:"dir"`
	Gang   backend.GangSpec `json:"gang"`
	Follow int              `json:"follow"`
}

// actAsWorker, called first thing by a test that uses startWorker, turns this test
// binary into the worker process when it was re-executed for that: it launches the
// gang, prints "seen <replica> <seq> <line>" for each line it followed, then "ready",
// and waits to be killed. It never returns then; otherwise it does nothing.
func actAsWorker(t *testing.T) {
	spec := os.Getenv(workerEnv)
	if spec == "" {
		return
	}
	var w workerSpec
	if err := json.Unmarshal([]byte(spec), &w); err != nil {
		t.Fatal(err)
	}
	b, err := New(WithStateDir(w.Dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(context.Background(), w.Gang); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.Gang.Replicas {
		if w.Follow > 0 {
			for _, l := range firstLines(t, b, w.Gang.GangRef, r.Name, w.Follow) {
				fmt.Printf("seen %s %d %s\n", r.Name, l.Seq, l.Line)
			}
		}
	}
	fmt.Println("ready")
	select {} // until killed
}

// startWorker re-executes the running test as a worker process (actAsWorker) that
// launches g on dir, and returns once it is ready, with the lines it followed by replica
// (index = seq-1). The process is killed when the test ends.
func startWorker(t *testing.T, dir string, g backend.GangSpec, follow int) (*exec.Cmd, map[string][]string) {
	t.Helper()
	spec, err := json.Marshal(workerSpec{Dir: dir, Gang: g, Follow: follow})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	seen := map[string][]string{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			return cmd, seen
		}
		var name string
		var seq int
		if _, err := fmt.Sscanf(line, "seen %s %d", &name, &seq); err == nil {
			_, text, _ := strings.Cut(strings.SplitN(line, " ", 3)[2], " ")
			if seq != len(seen[name])+1 {
				t.Fatalf("worker saw seq %d of %s after %d lines", seq, name, len(seen[name]))
			}
			seen[name] = append(seen[name], text)
		}
	}
	t.Fatalf("the worker process ended before it was ready: %v", sc.Err())
	return nil, nil
}

// killWorker kills a worker process with SIGKILL, as a crash would, and reaps it.
func killWorker(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// stopOnCleanup stops the gang with a Backend on dir when the test ends, so that no
// process outlives a test, whichever Backend started it.
func stopOnCleanup(t *testing.T, dir string, ref backend.GangRef) {
	t.Cleanup(func() {
		if b, err := New(WithStateDir(dir)); err == nil {
			_ = b.Stop(context.Background(), ref)
		}
	})
}

// newBackendOn returns a new Backend on an existing state directory: a restarted worker.
func newBackendOn(t *testing.T, dir string) *Backend {
	t.Helper()
	b, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}
