package itest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DlcUp is a `dlc up` process in the foreground, started by StartDlcUp.
type DlcUp struct {
	// Banner is what it printed up to the "Submit a job" line.
	Banner  string
	mu      sync.Mutex
	stderr  bytes.Buffer
	stopped chan error
}

// Stderr is what the process has written to its standard error so far.
func (u *DlcUp) Stderr() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stderr.String()
}

func (u *DlcUp) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stderr.Write(p)
}

// StartDlcUp runs `bin up args...` and waits for its banner, failing the test if it
// exits first or ctx ends. When the test ends it is sent SIGTERM and must exit within
// 20 s (else the test fails and it is killed).
func StartDlcUp(t testing.TB, ctx context.Context, bin string, args ...string) *DlcUp {
	t.Helper()
	up := exec.CommandContext(ctx, bin, append([]string{"up"}, args...)...)
	up.Cancel = func() error { return up.Process.Signal(syscall.SIGTERM) }
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	u := &DlcUp{stopped: make(chan error, 1)}
	up.Stderr = u
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-u.stopped:
			if err != nil {
				t.Logf("dlc up exited: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("dlc up did not stop on SIGTERM")
			_ = up.Process.Kill()
		}
	})
	banner := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Submit a job") {
				banner <- b.String()
			}
		}
		u.stopped <- up.Wait()
	}()
	select {
	case u.Banner = <-banner:
	case err := <-u.stopped:
		t.Fatalf("dlc up exited: %v\n%s", err, u.Stderr())
	case <-ctx.Done():
		t.Fatalf("no banner from dlc up:\n%s", u.Stderr())
	}
	return u
}

// CLI runs the dlc command bin against an API server.
type CLI struct {
	Bin, Server string
	// Token, when set, is passed in DLC_TOKEN; Workspace, when set, with -w.
	Token, Workspace string
	// Dir, when set, is the command's working directory.
	Dir string
	// Env, when set, is added to this process's environment.
	Env []string
}

// Run runs dlc with args and returns what it printed (standard output and error).
func (c CLI) Run(ctx context.Context, args ...string) (string, error) {
	pre := []string{"--server", c.Server}
	if c.Workspace != "" {
		pre = append(pre, "-w", c.Workspace)
	}
	cmd := exec.CommandContext(ctx, c.Bin, append(pre, args...)...)
	cmd.Env = append(os.Environ(), c.Env...)
	if c.Token != "" {
		cmd.Env = append(cmd.Env, "DLC_TOKEN="+c.Token)
	}
	cmd.Dir = c.Dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Runner is Run bound to ctx, in the shape the tests call: dlc("job", "list").
func (c CLI) Runner(ctx context.Context) func(args ...string) (string, error) {
	return func(args ...string) (string, error) { return c.Run(ctx, args...) }
}
