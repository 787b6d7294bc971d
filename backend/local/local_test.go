//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

func TestPyTorchGangEnv(t *testing.T) {
	b := newBackend(t, WithEnv(schemas.EnvVar{Name: "S3_ENDPOINT", Value: "http://127.0.0.1:7070"}))
	master := rep("master", 0, "env")
	master.Env = []schemas.EnvVar{{Name: "DLC_ROLE", Value: "master"}}
	worker := rep("worker", 0, "env")
	worker.Env = []schemas.EnvVar{{Name: "DLC_ROLE", Value: "worker"}, {Name: "S3_ENDPOINT", Value: "overridden"}}
	worker.Resources.GPU = 2
	g := gangOf(t, schemas.FrameworkPyTorch, worker, master)
	worker, master = g.Replicas[0], g.Replicas[1]
	launch(t, b, g)

	st := waitFor(t, b, g.GangRef, "replicas to finish", terminal)
	for _, r := range st.Replicas {
		if r.StartTime == nil || r.FinishTime == nil || r.FinishTime.Before(*r.StartTime) {
			t.Errorf("%s: start %v, finish %v", r.Name, r.StartTime, r.FinishTime)
		}
	}
	want := []schemas.ReplicaStatus{
		{Name: worker.Name, Role: "worker", Index: 0, Phase: schemas.ReplicaSucceeded, ExitCode: ptr[int32](0), Node: "test-node"},
		{Name: master.Name, Role: "master", Index: 0, Phase: schemas.ReplicaSucceeded, ExitCode: ptr[int32](0), Node: "test-node"},
	}
	if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime", "FinishTime")); diff != "" {
		t.Errorf("Observe mismatch (-want +got):\n%s", diff)
	}

	state, err := readState(b.gangDir(g.ID()))
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(state.Ports["rendezvous"])
	if port == "0" {
		t.Fatalf("no rendezvous port recorded: %+v", state.Ports)
	}
	common := map[string]string{
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "LOCAL_RANK": "0",
		"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": port, "PET_NNODES": "2",
	}
	wantEnv := map[string]map[string]string{
		master.Name: {"RANK": "0", "NODE_RANK": "0", "PET_NODE_RANK": "0", "LOCAL_WORLD_SIZE": "1",
			"PET_NPROC_PER_NODE": "1", "DLC_ROLE": "master", "S3_ENDPOINT": "http://127.0.0.1:7070"},
		worker.Name: {"RANK": "1", "NODE_RANK": "1", "PET_NODE_RANK": "1", "LOCAL_WORLD_SIZE": "2",
			"PET_NPROC_PER_NODE": "2", "DLC_ROLE": "worker", "S3_ENDPOINT": "overridden"},
	}
	for name, w := range wantEnv {
		maps.Copy(w, common)
		got := map[string]string{}
		for _, l := range logs(t, b, g.GangRef, name, 0) {
			if k, v, ok := strings.Cut(l.Line, "="); ok {
				if _, wanted := w[k]; wanted {
					got[k] = v
				}
			}
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s env mismatch (-want +got):\n%s", name, diff)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tests := map[string]struct {
		argv    []string
		want    schemas.ReplicaPhase
		code    *int32
		message string
		class   schemas.FailureClass
	}{
		"true":           {argv: []string{"/bin/true"}, want: schemas.ReplicaSucceeded, code: ptr[int32](0)},
		"false":          {argv: []string{"/bin/false"}, want: schemas.ReplicaFailed, code: ptr[int32](1), message: "exited with code 1", class: schemas.FailureError},
		"exit 3":         {argv: []string{"sh", "-c", "exit 3"}, want: schemas.ReplicaFailed, code: ptr[int32](3), message: "exited with code 3", class: schemas.FailureError},
		"killed":         {argv: []string{"sh", "-c", "kill -KILL $$"}, want: schemas.ReplicaFailed, code: ptr[int32](137), message: "killed by SIGKILL", class: schemas.FailureSignal},
		"terminated":     {argv: []string{"sh", "-c", "kill -TERM $$"}, want: schemas.ReplicaFailed, code: ptr[int32](143), message: "killed by SIGTERM", class: schemas.FailureSignal},
		"not found":      {argv: []string{"/nonexistent/train"}, want: schemas.ReplicaFailed, message: "cannot start: /nonexistent/train: no such file or directory", class: schemas.FailureConfig},
		"not executable": {argv: []string{"/dev/null"}, want: schemas.ReplicaFailed, message: "cannot start: /dev/null: permission denied", class: schemas.FailureConfig},
		"directory":      {argv: []string{"/"}, want: schemas.ReplicaFailed, message: "cannot start: /: is a directory", class: schemas.FailureConfig},
		"not on PATH":    {argv: []string{"opendlc-no-such-command"}, want: schemas.ReplicaFailed, message: `cannot start: exec: "opendlc-no-such-command": executable file not found in $PATH`, class: schemas.FailureConfig},
		"stdout closed":  {argv: []string{"sh", "-c", "exec >&- 2>&-; exit 0"}, want: schemas.ReplicaSucceeded, code: ptr[int32](0)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, tc.argv...))
			launch(t, b, g)
			st := waitFor(t, b, g.GangRef, "the replica to finish", terminal)
			got := st.Replicas[0]
			want := schemas.ReplicaStatus{Name: g.Replicas[0].Name, Role: "worker", Phase: tc.want,
				ExitCode: tc.code, Message: tc.message, Node: "test-node", Reason: tc.class}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime", "FinishTime")); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
			if got.FinishTime == nil {
				t.Error("no finish time")
			}
		})
	}
}

func TestStopKillsProcessGroups(t *testing.T) {
	b := newBackend(t, WithStopGracePeriod(300*time.Millisecond))
	// Each replica prints the pid of a child it started, which must die with it. The
	// second ignores SIGTERM (and so does its child), so only SIGKILL ends it.
	g := gangOf(t, schemas.FrameworkPyTorch,
		rep("master", 0, "sh", "-c", "sleep 600 & echo $!; wait"),
		rep("worker", 0, "sh", "-c", `trap "" TERM; sleep 600 & echo $!; wait`),
	)
	launch(t, b, g)
	waitFor(t, b, g.GangRef, "replicas to run", running)

	var pids []int
	for _, r := range g.Replicas {
		pids = append(pids, pidOf(t, b, g, r.Name))
		child, err := strconv.Atoi(firstLines(t, b, g.GangRef, r.Name, 1)[0].Line)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, child)
	}
	for _, pid := range pids {
		if !testutil.Alive(pid) {
			t.Fatalf("pid %d is not running before Stop", pid)
		}
	}

	stopAndCheckGone(t, b, g.GangRef, pids)
	checkTermThenKill(t, b, g)

	// Stop is idempotent, and a stopped gang is not started again.
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch after Stop: %v", err)
	}
	checkTermThenKill(t, b, g)
}

func TestStopBeforeStartAndUnknown(t *testing.T) {
	b := newBackend(t)

	// A Launch cancelled before any replica started leaves a known gang of pending
	// replicas; once stopped, they report Stopped and are never started.
	g := gangOf(t, schemas.FrameworkPyTorch, rep("worker", 0, "sleep", "600"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Launch(cancelled, g); !errors.Is(err, context.Canceled) {
		t.Fatalf("Launch with a cancelled context = %v", err)
	}
	phase := func() schemas.ReplicaStatus {
		t.Helper()
		st, err := b.Observe(context.Background(), g.GangRef)
		if err != nil {
			t.Fatal(err)
		}
		return st.Replicas[0]
	}
	if got := phase(); got.Phase != schemas.ReplicaPending {
		t.Errorf("before Stop: %+v, want Pending", got)
	}
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	want := schemas.ReplicaStatus{Name: g.Replicas[0].Name, Role: "worker", Phase: schemas.ReplicaStopped, Message: "stopped before it started"}
	if diff := cmp.Diff(want, phase()); diff != "" {
		t.Errorf("after Stop and Launch (-want +got):\n%s", diff)
	}
	if lines := logs(t, b, g.GangRef, g.Replicas[0].Name, 0); len(lines) != 0 {
		t.Errorf("logs of a replica that never ran: %v", lines)
	}

	ref := backend.GangRef{Workspace: "test", Job: "never", Attempt: 1}
	if err := b.Stop(context.Background(), ref); err != nil {
		t.Errorf("Stop of an unknown gang: %v", err)
	}
	if err := b.Cleanup(context.Background(), ref); err != nil {
		t.Errorf("Cleanup of an unknown gang: %v", err)
	}
	if _, err := b.Observe(context.Background(), ref); !errors.Is(err, backend.ErrGangNotFound) {
		t.Errorf("Observe of an unknown gang = %v, want ErrGangNotFound", err)
	}
	err := b.FollowLogs(context.Background(), ref, "x", 0, func(backend.LogLine) error { return nil })
	if !errors.Is(err, backend.ErrGangNotFound) {
		t.Errorf("FollowLogs of an unknown gang = %v, want ErrGangNotFound", err)
	}
}

// TestLaunchIsIdempotent launches one gang concurrently from two Backends on the same
// state directory (two workers) and checks that every replica started once.
func TestLaunchIsIdempotent(t *testing.T) {
	b := newBackend(t)
	other, err := New(WithStateDir(b.stateDir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	g := gangOf(t, schemas.FrameworkPyTorch, rep("master", 0, "sleep", "600"), rep("worker", 0, "sleep", "600"))
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() { errs <- b.Launch(context.Background(), g) })
		wg.Go(func() { errs <- other.Launch(context.Background(), g) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
	}
	waitFor(t, b, g.GangRef, "replicas to run", running)
	before := map[string]int{}
	for _, r := range g.Replicas {
		before[r.Name] = pidOf(t, b, g, r.Name)
	}
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch again: %v", err)
	}

	// Every supervisor Launch started is running by the time Launch returns, so any
	// duplicate is visible now: a second session for the same replica.
	procs := replicaSessions(t, b.stateDir)
	want := map[string][]int{}
	for _, r := range g.Replicas {
		want[filepath.Join(b.gangDir(g.ID()), r.Name)] = []int{before[r.Name]}
		if pid := pidOf(t, b, g, r.Name); pid != before[r.Name] {
			t.Errorf("%s: pid changed from %d to %d", r.Name, before[r.Name], pid)
		}
	}
	if diff := cmp.Diff(want, procs); diff != "" {
		t.Errorf("replica sessions (-want +got):\n%s", diff)
	}
}

// TestObserveDuringLaunch checks that a replica being started is never reported lost
// (claimed on disk, no process known yet).
func TestObserveDuringLaunch(t *testing.T) {
	b := newBackend(t)
	var replicas []backend.ReplicaSpec
	for i := range 16 {
		replicas = append(replicas, rep("worker", i, "sleep", "600"))
	}
	g := gangOf(t, schemas.FrameworkPyTorch, replicas...)
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	done := make(chan error, 1)
	go func() { done <- b.Launch(context.Background(), g) }()
	for launched := false; !launched; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Launch: %v", err)
			}
			launched = true
		default:
		}
		st, err := b.Observe(context.Background(), g.GangRef)
		if errors.Is(err, backend.ErrGangNotFound) {
			continue // gang.json not written yet
		} else if err != nil {
			t.Fatal(err)
		}
		for _, r := range st.Replicas {
			if r.Phase != schemas.ReplicaPending && r.Phase != schemas.ReplicaRunning {
				t.Fatalf("%s is %s (%s) while launching", r.Name, r.Phase, r.Message)
			}
		}
	}
	waitFor(t, b, g.GangRef, "replicas to run", running)
}

func TestLaunchRejectsBadSpecs(t *testing.T) {
	b := newBackend(t)
	good := gangOf(t, schemas.FrameworkPyTorch, rep("worker", 0, "/bin/true"))
	launch(t, b, good)
	changed := good
	changed.Replicas = []backend.ReplicaSpec{good.Replicas[0]}
	changed.Replicas[0].Command = []string{"/bin/false"}
	dup := good
	dup.Job += "-dup"
	dup.Replicas = []backend.ReplicaSpec{good.Replicas[0], good.Replicas[0]}
	empty := good
	empty.Job += "-empty"
	empty.Replicas = []backend.ReplicaSpec{{Name: "x", Role: "worker"}}
	tf := good
	tf.Job += "-tf"
	tf.Framework = "caffe"
	slash := good
	slash.Workspace = "a/b"
	secrets := good
	secrets.Job += "-secrets"
	secrets.EnvFromSecrets = []string{"s3-creds"}

	tests := map[string]backend.GangSpec{
		"different spec, same gang": changed,
		"duplicate replica":         dup,
		"empty command":             empty,
		"unsupported framework":     tf,
		"path in gang id":           slash,
		"secrets need kubernetes":   secrets,
	}
	for name, g := range tests {
		t.Run(name, func(t *testing.T) {
			err := b.Launch(context.Background(), g)
			if !errors.Is(err, backend.ErrInvalidSpec) {
				t.Errorf("Launch error = %v, want one that is backend.ErrInvalidSpec", err)
			}
		})
	}
}

// TestNewBackendAdoptsReplicas: a second Backend on the same state directory (a
// restarted worker) sees the first one's replica running, never starts it again,
// follows its output and stops it.
func TestNewBackendAdoptsReplicas(t *testing.T) {
	dir := t.TempDir()
	first, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	g := gangOf(t, schemas.FrameworkPyTorch, rep("worker", 0, "sh", "-c", "echo hello; exec sleep 600"))
	name := g.Replicas[0].Name
	launch(t, first, g)
	waitFor(t, first, g.GangRef, "the replica to run", running)
	firstLines(t, first, g.GangRef, name, 1)
	pid := pidOf(t, first, g, name)

	second, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	st, err := second.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.ReplicaStatus{{Name: name, Role: "worker", Phase: schemas.ReplicaRunning, Node: "test-node"}}
	if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime")); diff != "" {
		t.Errorf("status mismatch (-want +got):\n%s", diff)
	}
	if st.Replicas[0].StartTime == nil {
		t.Error("no start time for the adopted replica")
	}
	if diff := cmp.Diff(map[string][]int{filepath.Join(second.gangDir(g.ID()), name): {pid}}, replicaSessions(t, dir)); diff != "" {
		t.Errorf("replica sessions after the second Launch (-want +got):\n%s", diff)
	}
	if l := firstLines(t, second, g.GangRef, name, 1); l[0].Line != "hello" || l[0].Seq != 1 {
		t.Errorf("second Backend's first line: %+v", l[0])
	}

	if err := second.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	if testutil.Alive(pid) {
		t.Errorf("supervisor %d survived Stop", pid)
	}
	// The first Backend reads what the stopped replica left in the state directory; it
	// may see it a moment after Stop returns.
	st = waitFor(t, first, g.GangRef, "the first Backend to see the replica end", func(r schemas.ReplicaStatus) bool {
		return r.Phase != schemas.ReplicaRunning
	})
	if r := st.Replicas[0]; r.Phase != schemas.ReplicaStopped || r.Message != "stopped by SIGTERM" || r.ExitCode == nil || *r.ExitCode != 143 {
		t.Errorf("after Stop: %s %q exit %v, want Stopped by SIGTERM (143)", r.Phase, r.Message, r.ExitCode)
	}
	if lines := logs(t, second, g.GangRef, name, 0); len(lines) != 1 || lines[0].Line != "hello" {
		t.Errorf("logs after Stop: %+v", lines)
	}
}

// followAll follows a replica's log after afterSeq to its end in the background.
func followAll(ctx context.Context, b *Backend, ref backend.GangRef, replica string, afterSeq int64) <-chan []backend.LogLine {
	out := make(chan []backend.LogLine, 1)
	go func() {
		var lines []backend.LogLine
		err := b.FollowLogs(ctx, ref, replica, afterSeq, func(l backend.LogLine) error {
			lines = append(lines, l)
			return nil
		})
		if err != nil {
			lines = append(lines, backend.LogLine{Seq: -1, Line: err.Error()})
		}
		out <- lines
	}()
	return out
}

// TestWorkerRestart kills a real worker process (this test binary, re-executed) with
// SIGKILL while its gang runs. The replicas go on, and a new Backend on the same state
// directory re-adopts them: it reports them Running, resumes their logs where the dead
// worker's forwarder left off with no gap and no repeat, and observes their exit codes.
func TestWorkerRestart(t *testing.T) {
	actAsWorker(t)
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	// Five lines, then the gate (the worker is killed meanwhile), then 35 lines, slowly,
	// then the exit code given.
	const script = `for i in 1 2 3 4 5; do echo "line $i"; done
while [ ! -e "$1" ]; do sleep 0.01; done
i=6; while [ $i -le 40 ]; do echo "line $i"; sleep 0.01; i=$((i+1)); done
exit $2`
	g := gangOf(t, schemas.FrameworkCustom,
		rep("worker", 0, "sh", "-c", script, "sh", gate, "0"),
		rep("worker", 1, "sh", "-c", script, "sh", gate, "3"))
	stopOnCleanup(t, dir, g.GangRef)
	const forwarded = 3 // lines the dead worker followed
	worker, seen := startWorker(t, dir, g, forwarded)
	sups := map[string][]int{}
	for _, r := range g.Replicas {
		rdir := filepath.Join(dir, g.ID(), r.Name)
		sups[rdir] = []int{readPid(rdir)}
	}
	killWorker(t, worker)
	for rdir, pid := range sups {
		if !testutil.Alive(pid[0]) {
			t.Fatalf("the supervisor of %s died with the worker", filepath.Base(rdir))
		}
	}

	b, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaRunning {
			t.Errorf("%s is %s (%s) after the worker died, want Running", r.Name, r.Phase, r.Message)
		}
	}
	// A retried Launch starts nothing.
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sups, replicaSessions(t, dir)); diff != "" {
		t.Errorf("replica sessions after a new worker's Launch (-want +got):\n%s", diff)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follows := map[string]<-chan []backend.LogLine{}
	for _, r := range g.Replicas {
		follows[r.Name] = followAll(ctx, b, g.GangRef, r.Name, forwarded)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Replicas {
		var want, got []string
		for i := 1; i <= 40; i++ {
			want = append(want, fmt.Sprintf("%d line %d", i, i))
		}
		for i, l := range seen[r.Name] {
			got = append(got, fmt.Sprintf("%d %s", i+1, l))
		}
		for _, l := range <-follows[r.Name] {
			got = append(got, fmt.Sprintf("%d %s", l.Seq, l.Line))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: lines seen by the dead worker, then resumed by the new one (-want +got):\n%s", r.Name, diff)
		}
	}

	st = waitFor(t, b, g.GangRef, "replicas to finish", terminal)
	want := []schemas.ReplicaStatus{
		{Name: g.Replicas[0].Name, Role: "worker", Index: 0, Phase: schemas.ReplicaSucceeded, ExitCode: ptr[int32](0), Node: "test-node"},
		{Name: g.Replicas[1].Name, Role: "worker", Index: 1, Phase: schemas.ReplicaFailed, ExitCode: ptr[int32](3), Node: "test-node", Message: "exited with code 3", Reason: schemas.FailureError},
	}
	if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime", "FinishTime")); diff != "" {
		t.Errorf("final status (-want +got):\n%s", diff)
	}
	for _, r := range st.Replicas {
		if r.StartTime == nil || r.FinishTime == nil || r.FinishTime.Before(*r.StartTime) {
			t.Errorf("%s: start %v, finish %v", r.Name, r.StartTime, r.FinishTime)
		}
	}
}

// TestStopReadoptedGang: a new worker stops the gang of a worker that was killed, and
// every process of it is gone when Stop returns: supervisors, replicas, their children,
// one that ignores SIGTERM, and one that left the replica's session.
func TestStopReadoptedGang(t *testing.T) {
	actAsWorker(t)
	dir := t.TempDir()
	escape := "sleep 600 & echo $!" // stands in when there is no setsid(1)
	if _, err := exec.LookPath("setsid"); err == nil {
		escape = "setsid sleep 600 & echo $!"
	}
	g := gangOf(t, schemas.FrameworkPyTorch,
		rep("master", 0, "sh", "-c", "echo $$; sleep 600 & echo $!; "+escape+"; wait"),
		rep("worker", 0, "sh", "-c", `trap "" TERM; echo $$; sleep 600 & echo $!; sleep 600 & echo $!; wait`))
	stopOnCleanup(t, dir, g.GangRef)
	worker, seen := startWorker(t, dir, g, 3)
	var pids []int
	for _, r := range g.Replicas {
		pids = append(pids, readPid(filepath.Join(dir, g.ID(), r.Name)))
		for _, l := range seen[r.Name] {
			pid, err := strconv.Atoi(l)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
	}
	killWorker(t, worker)
	for _, pid := range pids {
		if !testutil.Alive(pid) {
			t.Fatalf("pid %d is not running after the worker died", pid)
		}
	}

	b, err := New(WithStateDir(dir), WithNode("test-node"), WithStopGracePeriod(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, g.GangRef, "replicas to run", running)
	stopAndCheckGone(t, b, g.GangRef, pids)
	if left := replicaSessions(t, dir); len(left) != 0 {
		t.Errorf("replica processes left: %v", left)
	}
	checkTermThenKill(t, b, g)
}

// checkTermThenKill checks the status of a stopped gang of a master that SIGTERM ended
// and a worker that ignored it, so SIGKILL did.
func checkTermThenKill(t *testing.T, b *Backend, g backend.GangSpec) {
	t.Helper()
	st, err := b.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.ReplicaStatus{
		{Name: g.Replicas[0].Name, Role: "master", Phase: schemas.ReplicaStopped, ExitCode: ptr[int32](143), Message: "stopped by SIGTERM", Node: "test-node"},
		{Name: g.Replicas[1].Name, Role: "worker", Phase: schemas.ReplicaStopped, ExitCode: ptr[int32](137), Message: "stopped by SIGKILL", Node: "test-node"},
	}
	if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime", "FinishTime")); diff != "" {
		t.Errorf("status mismatch (-want +got):\n%s", diff)
	}
}

// TestLostSupervisor: a replica whose supervisor was killed from outside, so that it
// never wrote the exit file, is reported Failed and lost, by a new worker as by the one
// that started it; its log ends, and Stop kills what is left of it.
func TestLostSupervisor(t *testing.T) {
	tests := map[string]struct {
		kill     func(supervisor int) error
		leftover bool // the replica outlives its supervisor
	}{
		"supervisor killed": {kill: func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }, leftover: true},
		"group killed":      {kill: func(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			first, err := New(WithStateDir(dir), WithNode("test-node"))
			if err != nil {
				t.Fatal(err)
			}
			g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sh", "-c", "echo $$; exec sleep 600"))
			launch(t, first, g)
			name := g.Replicas[0].Name
			replica, err := strconv.Atoi(firstLines(t, first, g.GangRef, name, 1)[0].Line)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.kill(pidOf(t, first, g, name)); err != nil {
				t.Fatal(err)
			}

			for _, b := range []*Backend{newBackendOn(t, dir), first} {
				st := waitFor(t, b, g.GangRef, "the replica to be lost", terminal)
				want := []schemas.ReplicaStatus{{Name: name, Role: "worker", Phase: schemas.ReplicaFailed, Message: LostMessage, Node: "test-node", Reason: schemas.FailureUnclassified}}
				if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime")); diff != "" {
					t.Errorf("status mismatch (-want +got):\n%s", diff)
				}
				if lines := logs(t, b, g.GangRef, name, 0); len(lines) != 1 || lines[0].Line != strconv.Itoa(replica) {
					t.Errorf("logs of the lost replica: %+v", lines)
				}
			}
			// A process killed with its group may still be exiting on a loaded machine:
			// give it a moment before calling it a leftover.
			if !tc.leftover {
				testutil.Eventually(t, 5*time.Second, fmt.Sprintf("replica %d, killed with its group, to exit", replica),
					func() bool { return !testutil.Alive(replica) }, 20*time.Millisecond)
			}
			if testutil.Alive(replica) != tc.leftover {
				t.Fatalf("replica %d alive: %v, want %v", replica, testutil.Alive(replica), tc.leftover)
			}
			b := newBackendOn(t, dir)
			if err := b.Stop(context.Background(), g.GangRef); err != nil {
				t.Fatal(err)
			}
			if testutil.Alive(replica) {
				t.Errorf("replica %d survived Stop", replica)
			}
			st, err := b.Observe(context.Background(), g.GangRef)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Replicas[0]; r.Phase != schemas.ReplicaFailed || r.Message != LostMessage {
				t.Errorf("after Stop: %s %q, want it still lost", r.Phase, r.Message)
			}
		})
	}
}

// TestArgvPassedVerbatim: the supervisor passes the argv through as positional
// parameters, never through the shell's parser, and runs a program, never a builtin.
func TestArgvPassedVerbatim(t *testing.T) {
	b := newBackend(t)
	args := []string{"$HOME", "`id`", "$(echo no)", "a b", "'q'", `"d"`, `back\slash`, "", "-n", "*", "; exit 9"}
	g := gangOf(t, schemas.FrameworkCustom,
		rep("worker", 0, append([]string{"printf", `%s\n`}, args...)...),
		// The shell's echo would turn \t into a tab.
		rep("worker", 1, "echo", `a\tb`))
	launch(t, b, g)
	st := waitFor(t, b, g.GangRef, "replicas to finish", terminal)
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaSucceeded {
			t.Errorf("%s: %s %q", r.Name, r.Phase, r.Message)
		}
	}
	for i, want := range [][]string{args, {`a\tb`}} {
		var got []string
		for _, l := range logs(t, b, g.GangRef, g.Replicas[i].Name, 0) {
			got = append(got, l.Line)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("replica %d output (-want +got):\n%s", i, diff)
		}
	}
}

func TestWorkingDir(t *testing.T) {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir()
	b := newBackend(t, WithBaseDir(base))
	script := []string{"sh", "-c", `echo "$PWD"; pwd -P`}
	r0, r1, r2 := rep("worker", 0, script...), rep("worker", 1, script...), rep("worker", 2, script...)
	r1.WorkingDir, r2.WorkingDir = "sub", abs
	g := gangOf(t, schemas.FrameworkCustom, r0, r1, r2)
	launch(t, b, g)
	waitFor(t, b, g.GangRef, "replicas to finish", terminal)
	for i, want := range []string{base, filepath.Join(base, "sub"), abs} {
		resolved, err := filepath.EvalSymlinks(want)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range logs(t, b, g.GangRef, g.Replicas[i].Name, 0) {
			got = append(got, l.Line)
		}
		if diff := cmp.Diff([]string{want, resolved}, got); diff != "" {
			t.Errorf("replica %d working dir (-want +got):\n%s", i, diff)
		}
	}
}

func TestCleanupRemovesState(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkPyTorch, rep("worker", 0, "sleep", "600"))
	launch(t, b, g)
	waitFor(t, b, g.GangRef, "the replica to run", running)
	pid := pidOf(t, b, g, g.Replicas[0].Name)
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if testutil.Alive(pid) {
		t.Errorf("pid %d survived Cleanup", pid)
	}
	if _, err := os.Stat(b.gangDir(g.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir after Cleanup: %v", err)
	}
	if _, err := b.Observe(context.Background(), g.GangRef); !errors.Is(err, backend.ErrGangNotFound) {
		t.Errorf("Observe after Cleanup = %v, want ErrGangNotFound", err)
	}
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}

// stopAndCheckGone stops gang ref and checks that none of pids runs once Stop has
// returned.
func stopAndCheckGone(t *testing.T, b *Backend, ref backend.GangRef, pids []int) {
	t.Helper()
	start := time.Now()
	if err := b.Stop(context.Background(), ref); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(start))
	for _, pid := range pids {
		if testutil.Alive(pid) {
			t.Errorf("pid %d still runs after Stop returned", pid)
		}
	}
}
