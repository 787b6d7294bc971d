//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/activities"
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
		for k, v := range common {
			w[k] = v
		}
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
	}{
		"true":          {argv: []string{"/bin/true"}, want: schemas.ReplicaSucceeded, code: ptr[int32](0)},
		"false":         {argv: []string{"/bin/false"}, want: schemas.ReplicaFailed, code: ptr[int32](1), message: "exited with code 1"},
		"exit 3":        {argv: []string{"sh", "-c", "exit 3"}, want: schemas.ReplicaFailed, code: ptr[int32](3), message: "exited with code 3"},
		"killed":        {argv: []string{"sh", "-c", "kill -KILL $$"}, want: schemas.ReplicaFailed, code: ptr[int32](137), message: "killed by SIGKILL"},
		"not found":     {argv: []string{"/nonexistent/train"}, want: schemas.ReplicaFailed, message: "cannot start: fork/exec /nonexistent/train: no such file or directory"},
		"not on PATH":   {argv: []string{"opendlc-no-such-command"}, want: schemas.ReplicaFailed, message: `cannot start: exec: "opendlc-no-such-command": executable file not found in $PATH`},
		"stdout closed": {argv: []string{"sh", "-c", "exec >&- 2>&-; exit 0"}, want: schemas.ReplicaSucceeded, code: ptr[int32](0)},
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
				ExitCode: tc.code, Message: tc.message, Node: "test-node"}
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
		if !alive(pid) {
			t.Fatalf("pid %d is not running before Stop", pid)
		}
	}

	start := time.Now()
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(start))
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still runs after Stop returned", pid)
		}
	}
	check := func() {
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
	check()

	// Stop is idempotent, and a stopped gang is not started again.
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch after Stop: %v", err)
	}
	check()
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

	ref := activities.GangRef{Workspace: "test", Job: "never", Attempt: 1}
	if err := b.Stop(context.Background(), ref); err != nil {
		t.Errorf("Stop of an unknown gang: %v", err)
	}
	if err := b.Cleanup(context.Background(), ref); err != nil {
		t.Errorf("Cleanup of an unknown gang: %v", err)
	}
	if _, err := b.Observe(context.Background(), ref); !errors.Is(err, activities.ErrGangNotFound) {
		t.Errorf("Observe of an unknown gang = %v, want ErrGangNotFound", err)
	}
	err := b.FollowLogs(context.Background(), ref, "x", 0, func(activities.LogLine) error { return nil })
	if !errors.Is(err, activities.ErrGangNotFound) {
		t.Errorf("FollowLogs of an unknown gang = %v, want ErrGangNotFound", err)
	}
}

func TestLaunchIsIdempotent(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkPyTorch, rep("master", 0, "sleep", "600"), rep("worker", 0, "sleep", "600"))
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- b.Launch(context.Background(), g) })
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

	// Every process Launch started has exec'd by the time Launch returns, so any
	// duplicate is visible now.
	procs := replicaProcs(t, b.stateDir)
	want := map[string][]int{}
	for _, r := range g.Replicas {
		want[filepath.Join(b.gangDir(g.ID()), r.Name)] = []int{before[r.Name]}
		if pid := pidOf(t, b, g, r.Name); pid != before[r.Name] {
			t.Errorf("%s: pid changed from %d to %d", r.Name, before[r.Name], pid)
		}
	}
	if diff := cmp.Diff(want, procs); diff != "" {
		t.Errorf("replica processes (-want +got):\n%s", diff)
	}
}

// TestObserveDuringLaunch checks that a replica being started is never reported lost
// (claimed on disk, no process known yet).
func TestObserveDuringLaunch(t *testing.T) {
	b := newBackend(t)
	var replicas []activities.ReplicaSpec
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
		if errors.Is(err, activities.ErrGangNotFound) {
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
	changed.Replicas = []activities.ReplicaSpec{good.Replicas[0]}
	changed.Replicas[0].Command = []string{"/bin/false"}
	dup := good
	dup.Job += "-dup"
	dup.Replicas = []activities.ReplicaSpec{good.Replicas[0], good.Replicas[0]}
	empty := good
	empty.Job += "-empty"
	empty.Replicas = []activities.ReplicaSpec{{Name: "x", Role: "worker"}}
	tf := good
	tf.Job += "-tf"
	tf.Framework = schemas.FrameworkTensorFlow
	slash := good
	slash.Workspace = "a/b"

	tests := map[string]activities.GangSpec{
		"different spec, same gang": changed,
		"duplicate replica":         dup,
		"empty command":             empty,
		"unsupported framework":     tf,
		"path in gang id":           slash,
	}
	for name, g := range tests {
		t.Run(name, func(t *testing.T) {
			err := b.Launch(context.Background(), g)
			if got := activities.ErrorType(err); got != activities.ErrTypeInvalidSpec {
				t.Errorf("Launch error = %v (type %q), want a non-retryable %s", err, got, activities.ErrTypeInvalidSpec)
			}
		})
	}
}

func TestNewBackendReportsLostReplicas(t *testing.T) {
	dir := t.TempDir()
	first, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	g := gangOf(t, schemas.FrameworkPyTorch, rep("worker", 0, "sh", "-c", "echo hello; exec sleep 600"))
	launch(t, first, g)
	waitFor(t, first, g.GangRef, "the replica to run", running)
	firstLines(t, first, g.GangRef, g.Replicas[0].Name, 1)
	pid := pidOf(t, first, g, g.Replicas[0].Name)

	// A second Backend on the same state directory stands for a restarted worker: it did
	// not start the process, so it reports it lost and never starts it again.
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
	want := []schemas.ReplicaStatus{{Name: g.Replicas[0].Name, Role: "worker", Phase: schemas.ReplicaFailed, Message: LostMessage, Node: "test-node"}}
	if diff := cmp.Diff(want, st.Replicas, cmpopts.IgnoreFields(schemas.ReplicaStatus{}, "StartTime")); diff != "" {
		t.Errorf("status mismatch (-want +got):\n%s", diff)
	}
	if st.Replicas[0].StartTime == nil {
		t.Error("no start time for the lost replica")
	}
	if got := replicaProcs(t, dir); len(got) != 1 || len(got[filepath.Join(second.gangDir(g.ID()), g.Replicas[0].Name)]) != 1 {
		t.Errorf("replica processes after the second Launch: %v, want only pid %d", got, pid)
	}
	// Its logs are what was written, and following them ends at once.
	lines := logs(t, second, g.GangRef, g.Replicas[0].Name, 0)
	if len(lines) != 1 || lines[0].Line != "hello" {
		t.Errorf("logs of the lost replica: %+v", lines)
	}
}

// TestWorkerDeathKillsReplicas kills a real worker process (this test binary, re-run as a
// helper) while its replicas run: the replicas die with it, and the next worker reports
// them lost and, on Stop, kills what they had started.
func TestWorkerDeathKillsReplicas(t *testing.T) {
	if dir := os.Getenv("OPENDLC_LOCAL_TEST_HELPER"); dir != "" {
		helperWorker(t, dir)
	}
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestWorkerDeathKillsReplicas$", "-test.v")
	helper.Env = append(os.Environ(), "OPENDLC_LOCAL_TEST_HELPER="+dir)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	var leader, child int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "ready %d %d", &leader, &child); err == nil {
			break
		}
	}
	if leader == 0 {
		t.Fatalf("helper did not get ready: %v", sc.Err())
	}
	if !alive(leader) || !alive(child) {
		t.Fatalf("replica %d or its child %d is not running", leader, child)
	}

	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	eventually(t, 10*time.Second, "the replica to die with the worker", func() bool { return !alive(leader) })
	if !alive(child) {
		t.Fatalf("the replica's child %d died too; this test no longer covers leftovers", child)
	}

	b, err := New(WithStateDir(dir), WithNode("test-node"))
	if err != nil {
		t.Fatal(err)
	}
	g := helperGang()
	st, err := b.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Replicas[0]; r.Phase != schemas.ReplicaFailed || r.Message != LostMessage {
		t.Errorf("after the worker died: %+v, want Failed and lost", r)
	}
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Stop to kill the lost replica's child", func() bool { return !alive(child) })
}

func helperGang() activities.GangSpec {
	return activities.GangSpec{
		GangRef:   activities.GangRef{Workspace: "test", Job: "helper", Attempt: 1},
		Framework: schemas.FrameworkCustom,
		Replicas: []activities.ReplicaSpec{{Name: "helper-worker-0-a1", Role: "worker",
			Command: []string{"sh", "-c", "sleep 600 & echo $!; wait"}}},
	}
}

// helperWorker is the worker process of TestWorkerDeathKillsReplicas: the test binary
// re-executed with OPENDLC_LOCAL_TEST_HELPER set. It never returns.
func helperWorker(t *testing.T, dir string) {
	b, err := New(WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	g := helperGang()
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	child := firstLines(t, b, g.GangRef, g.Replicas[0].Name, 1)[0].Line
	fmt.Printf("ready %d %s\n", pidOf(t, b, g, g.Replicas[0].Name), child)
	select {} // until killed
}

// TestReplicaOutlivesLaunchingThread: the parent-death signal fires when the thread that
// forked a child ends, and the Go runtime ends a thread whose locked goroutine returns.
// Launching from such a goroutine must not kill the replica.
func TestReplicaOutlivesLaunchingThread(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sleep", "600"))
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	// The goroutine must not run on the main thread, which the runtime never ends.
	var tid int
	errs := make(chan error, 1)
	for tid == 0 {
		tids := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			if unix.Gettid() == unix.Getpid() {
				runtime.UnlockOSThread()
				tids <- 0
				return
			}
			tids <- unix.Gettid()
			errs <- b.Launch(context.Background(), g)
		}()
		tid = <-tids
	}
	eventually(t, 10*time.Second, "the launching thread to end", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return errors.Is(err, os.ErrNotExist)
	})
	// Had the replica been forked on that thread, SIGKILL would be pending for it by
	// now, and it would end killed rather than stopped by SIGTERM.
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	st, err := b.Observe(context.Background(), g.GangRef)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Replicas[0]; r.Phase != schemas.ReplicaStopped || r.ExitCode == nil || *r.ExitCode != 143 {
		t.Errorf("replica %s %q, want Stopped by SIGTERM (143): the thread's end killed it", r.Phase, r.Message)
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
		real, err := filepath.EvalSymlinks(want)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range logs(t, b, g.GangRef, g.Replicas[i].Name, 0) {
			got = append(got, l.Line)
		}
		if diff := cmp.Diff([]string{want, real}, got); diff != "" {
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
	if alive(pid) {
		t.Errorf("pid %d survived Cleanup", pid)
	}
	if _, err := os.Stat(b.gangDir(g.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir after Cleanup: %v", err)
	}
	if _, err := b.Observe(context.Background(), g.GangRef); !errors.Is(err, activities.ErrGangNotFound) {
		t.Errorf("Observe after Cleanup = %v, want ErrGangNotFound", err)
	}
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}
