//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/activities"
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
func gangOf(t *testing.T, fw schemas.Framework, replicas ...activities.ReplicaSpec) activities.GangSpec {
	job := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	g := activities.GangSpec{
		GangRef:   activities.GangRef{Workspace: "test", Job: job, Attempt: 1},
		Framework: fw,
	}
	for _, r := range replicas {
		r.Name = g.ReplicaName(r.Role, r.Index)
		g.Replicas = append(g.Replicas, r)
	}
	return g
}

// rep is a replica running argv.
func rep(role string, index int, argv ...string) activities.ReplicaSpec {
	return activities.ReplicaSpec{Role: role, Index: index, Command: argv}
}

// launch launches g and stops it when the test ends, so no process outlives a test.
func launch(t *testing.T, b *Backend, g activities.GangSpec) {
	t.Helper()
	t.Cleanup(func() { _ = b.Stop(context.Background(), g.GangRef) })
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch: %v", err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor observes the gang until every replica satisfies ok, and returns that status.
func waitFor(t *testing.T, b *Backend, ref activities.GangRef, what string, ok func(schemas.ReplicaStatus) bool) activities.GangStatus {
	t.Helper()
	var st activities.GangStatus
	eventually(t, 20*time.Second, what, func() bool {
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
func logs(t *testing.T, b *Backend, ref activities.GangRef, replica string, afterSeq int64) []activities.LogLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []activities.LogLine
	err := b.FollowLogs(ctx, ref, replica, afterSeq, func(l activities.LogLine) error {
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
func firstLines(t *testing.T, b *Backend, ref activities.GangRef, replica string, n int) []activities.LogLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []activities.LogLine
	err := b.FollowLogs(ctx, ref, replica, 0, func(l activities.LogLine) error {
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

// alive reports whether pid is a live process (a zombie is not: nothing runs).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	return len(f) > 0 && string(f[0]) != "Z"
}

// replicaProcs lists the live processes whose environment marks them as started for a
// state directory under stateDir, by marker value.
func replicaProcs(t *testing.T, stateDir string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range paths {
		env, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			v, ok := bytes.CutPrefix(kv, []byte(replicaMarker+"="))
			if ok && strings.HasPrefix(string(v), stateDir+string(filepath.Separator)) {
				var pid int
				fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
				if alive(pid) {
					out[string(v)] = append(out[string(v)], pid)
				}
			}
		}
	}
	return out
}

// pidOf reads a replica's pid file.
func pidOf(t *testing.T, b *Backend, g activities.GangSpec, replica string) int {
	t.Helper()
	pid := readPid(filepath.Join(b.gangDir(g.ID()), replica))
	if pid == 0 {
		t.Fatalf("no pid recorded for %s", replica)
	}
	return pid
}
