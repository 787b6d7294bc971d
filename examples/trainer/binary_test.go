package main

// These tests build the trainer and run it as OpenDLC's backends do: as separate processes,
// configured by environment, against a real S3 gateway (versitygw, from devstack).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/internal/testutil"
)

// Shared by the tests of this file, made on first use: the trainer binary and one S3
// gateway with a bucket "dlc". Each test checkpoints under its own prefix.
var (
	fixtureOnce sync.Once
	fixtureDir  string
	trainerBin  string
	s3Srv       *devstack.S3
	fixtureErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if s3Srv != nil {
		if err := s3Srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close S3:", err)
		}
	}
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func fixtures(t *testing.T) {
	t.Helper()
	fixtureOnce.Do(func() {
		if fixtureDir, fixtureErr = os.MkdirTemp("", "trainer-test-"); fixtureErr != nil {
			return
		}
		trainerBin = filepath.Join(fixtureDir, "trainer")
		build := exec.Command("go", "build", "-o", trainerBin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			fixtureErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		s3Srv, fixtureErr = devstack.StartS3(context.Background(), devstack.S3Options{
			Dir: filepath.Join(fixtureDir, "s3"), Buckets: []string{"dlc"},
		})
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
}

// s3Env is the environment OpenDLC gives a replica to reach S3.
func s3Env() []string {
	return []string{
		"DLC_S3_ENDPOINT=" + s3Srv.Endpoint, "AWS_REGION=" + s3Srv.Region,
		"AWS_ACCESS_KEY_ID=" + s3Srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3Srv.SecretKey,
	}
}

func testStore(t *testing.T) *checkpoint.Store {
	t.Helper()
	s, err := checkpoint.NewStore(checkpoint.Config{Endpoint: s3Srv.Endpoint, Region: s3Srv.Region,
		AccessKey: s3Srv.AccessKey, SecretKey: s3Srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// proc is one trainer process.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// start runs the trainer with args and env added to a clean environment (PATH and HOME
// only, so nothing from the developer's shell leaks in).
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(trainerBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %v:\n%s", args, p.out.String())
		}
	})
	return p
}

// wait returns the exit status, failing the test if the process outlives timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("trainer still running after %s:\n%s", timeout, p.out.String())
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		t.Fatal(p.err)
		return -1
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var metricLine = regexp.MustCompile(`(?m)^dlc:metric epoch=(\d+) step=(\d+) loss=([0-9.]+) accuracy=([0-9.]+)$`)

// epochsReported lists the epochs of the metric lines in out.
func epochsReported(out string) []int {
	var epochs []int
	for _, m := range metricLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		epochs = append(epochs, n)
	}
	return epochs
}

func checkpointSteps(t *testing.T, s *checkpoint.Store, uri string) []int64 {
	t.Helper()
	ms, err := s.List(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	steps := []int64{}
	for _, m := range ms {
		steps = append(steps, m.Step)
	}
	return steps
}

// finalModel reads the weights of the newest checkpoint under uri.
func finalModel(t *testing.T, s *checkpoint.Store, uri string) Model {
	t.Helper()
	ctx := context.Background()
	m, err := s.Latest(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	_, files, err := s.Load(ctx, m.Ref)
	if err != nil {
		t.Fatal(err)
	}
	var mc modelCheckpoint
	if err := json.Unmarshal(files[modelFile], &mc); err != nil {
		t.Fatal(err)
	}
	return mc.Model
}

// TestCheckpointAndResume runs 3 epochs with checkpoints, then 2 more resumed from the
// last one, and checks the result is exactly that of 5 epochs in one go.
func TestCheckpointAndResume(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	uri := testURI(t)
	env := append(s3Env(), "DLC_CHECKPOINT_URI="+uri, "DLC_CHECKPOINT_KEEP=2", `DLC_PARAMS={"lr": 0.2}`)

	first := start(t, env, "--epochs", "3")
	if rc := first.wait(t, time.Minute); rc != 0 {
		t.Fatalf("first run exited %d:\n%s", rc, first.out.String())
	}
	out := first.out.String()
	if diff := cmp.Diff([]int{1, 2, 3}, epochsReported(out)); diff != "" {
		t.Errorf("epochs reported (-want +got):\n%s", diff)
	}
	for _, step := range []int{63, 126, 189} {
		want := fmt.Sprintf("dlc:checkpoint step=%d uri=%s/%012d\n", step, uri, step)
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Kept 2 of 3; each with its manifest, files and metrics.
	if diff := cmp.Diff([]int64{126, 189}, checkpointSteps(t, s, uri)); diff != "" {
		t.Errorf("checkpoints after the first run (-want +got):\n%s", diff)
	}
	latest, err := s.Latest(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range latest.Files {
		names = append(names, f.Name)
	}
	if diff := cmp.Diff([]string{modelFile, stateFile}, names); diff != "" {
		t.Errorf("checkpoint files (-want +got):\n%s", diff)
	}
	if latest.Metrics["epoch"] != 3 || latest.Metrics["accuracy"] < 0.8 {
		t.Errorf("manifest metrics = %v", latest.Metrics)
	}

	second := start(t, append(env, "DLC_RESUME_FROM="+latest.Ref), "--epochs", "5")
	if rc := second.wait(t, time.Minute); rc != 0 {
		t.Fatalf("resumed run exited %d:\n%s", rc, second.out.String())
	}
	out = second.out.String()
	if want := fmt.Sprintf("resumed from %s: epoch 3, step 189", latest.Ref); !strings.Contains(out, want) {
		t.Errorf("resumed run's output lacks %q:\n%s", want, out)
	}
	if diff := cmp.Diff([]int{4, 5}, epochsReported(out)); diff != "" {
		t.Errorf("epochs reported after resuming (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{252, 315}, checkpointSteps(t, s, uri)); diff != "" {
		t.Errorf("checkpoints after the resumed run (-want +got):\n%s", diff)
	}

	// The row order depends only on seed, epoch and rank, and the weights survive JSON
	// exactly, so stopping and resuming changes nothing.
	oneGoURI := uri + "-one-go"
	oneGo := start(t, append(s3Env(), "DLC_CHECKPOINT_URI="+oneGoURI, `DLC_PARAMS={"lr": 0.2}`), "--epochs", "5")
	if rc := oneGo.wait(t, time.Minute); rc != 0 {
		t.Fatalf("uninterrupted run exited %d:\n%s", rc, oneGo.out.String())
	}
	if diff := cmp.Diff(finalModel(t, s, oneGoURI), finalModel(t, s, uri)); diff != "" {
		t.Errorf("resumed training differs from uninterrupted training (-one go +resumed):\n%s", diff)
	}
}

// TestStopAndResumeDataParallel stops a two-rank job mid-run, as a node failure or a user
// would, and resumes it from its last checkpoint.
func TestStopAndResumeDataParallel(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	uri := testURI(t)
	launch := func(extra []string, args ...string) []*proc {
		port := freePort(t)
		var ps []*proc
		for rank := range 2 {
			env := append(s3Env(), extra...)
			env = append(env, "DLC_CHECKPOINT_URI="+uri, "WORLD_SIZE=2", "RANK="+strconv.Itoa(rank),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
			ps = append(ps, start(t, env, args...))
		}
		return ps
	}

	ranks := launch(nil, "--epochs", "50", "--epoch-sleep", "100ms")
	// Wait until at least two epochs are safely checkpointed.
	var latest checkpoint.Manifest
	testutil.Eventually(t, time.Minute, "a checkpoint of epoch 2", func() error {
		var err error
		latest, err = s.Latest(context.Background(), uri)
		if err != nil && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
			t.Fatal(err)
		}
		if err == nil && latest.Metrics["epoch"] >= 2 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not yet (%w); rank 0 so far:\n%s", err, ranks[0].out.String())
		}
		return fmt.Errorf("the newest is of epoch %v; rank 0 so far:\n%s", latest.Metrics["epoch"], ranks[0].out.String())
	})
	// Rank 1 is told first and has exited before rank 0 is told: signalled together,
	// rank 1 could see rank 0 gone (EOF) before its own signal is handled. Rank 0 may
	// notice its peer gone before its signal lands; it then waits for its signal
	// (noticeWait) and takes the notice, so it too exits 143.
	ranks[1].cmd.Process.Signal(syscall.SIGTERM)
	if rc := ranks[1].wait(t, 30*time.Second); rc != 143 {
		t.Errorf("rank 1 exited %d after SIGTERM, want 143", rc)
	}
	ranks[0].cmd.Process.Signal(syscall.SIGTERM)
	if rc := ranks[0].wait(t, 30*time.Second); rc != 143 {
		t.Errorf("rank 0 exited %d after SIGTERM, want 143", rc)
	}
	latest, err := s.Latest(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	stopped := int(latest.Metrics["epoch"])
	if stopped >= 50 {
		t.Fatalf("the job finished before it was stopped")
	}
	t.Logf("stopped after epoch %d; resuming from %s", stopped, latest.Ref)

	ranks = launch([]string{"DLC_RESUME_FROM=" + latest.Ref}, "--epochs", strconv.Itoa(stopped+3))
	for rank, p := range ranks {
		if rc := p.wait(t, time.Minute); rc != 0 {
			t.Fatalf("resumed rank %d exited %d:\n%s", rank, rc, p.out.String())
		}
	}
	if diff := cmp.Diff([]int{stopped + 1, stopped + 2, stopped + 3}, epochsReported(ranks[0].out.String())); diff != "" {
		t.Errorf("epochs reported after resuming (-want +got):\n%s", diff)
	}
	if want := fmt.Sprintf("rank 1: starting after epoch %d", stopped); !strings.Contains(ranks[1].out.String(), want) {
		t.Errorf("rank 1's output lacks %q:\n%s", want, ranks[1].out.String())
	}
	// Both ranks end on the same figures.
	done := regexp.MustCompile(`trainer: done: .*`)
	if a, b := done.FindString(ranks[0].out.String()), done.FindString(ranks[1].out.String()); a == "" || a != b {
		t.Errorf("ranks end differently:\n rank 0: %s\n rank 1: %s", a, b)
	}
}

func TestInjectedFailure(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	uri := testURI(t)
	env := append(s3Env(), "DLC_CHECKPOINT_URI="+uri, "DLC_ATTEMPT=0")

	p := start(t, env, "--epochs", "5", "--fail-at-epoch", "3", "--exit-code", "42", "--fail-attempt", "0")
	if rc := p.wait(t, time.Minute); rc != 42 {
		t.Fatalf("exit status %d, want 42:\n%s", rc, p.out.String())
	}
	if !strings.Contains(p.out.String(), "failing at epoch 3 with exit code 42") {
		t.Errorf("output does not say why it failed:\n%s", p.out.String())
	}
	if diff := cmp.Diff([]int64{63, 126}, checkpointSteps(t, s, uri)); diff != "" {
		t.Errorf("checkpoints before the failure (-want +got):\n%s", diff)
	}

	// The next attempt, resumed, is not failed again.
	latest, err := s.Latest(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	env = append(s3Env(), "DLC_CHECKPOINT_URI="+uri, "DLC_ATTEMPT=1", "DLC_RESUME_FROM="+latest.Ref)
	p = start(t, env, "--epochs", "5", "--fail-at-epoch", "3", "--exit-code", "42", "--fail-attempt", "0")
	if rc := p.wait(t, time.Minute); rc != 0 {
		t.Fatalf("second attempt exited %d:\n%s", rc, p.out.String())
	}
	if diff := cmp.Diff([]int{3, 4, 5}, epochsReported(p.out.String())); diff != "" {
		t.Errorf("epochs of the second attempt (-want +got):\n%s", diff)
	}
}

func TestRefusesBadResume(t *testing.T) {
	fixtures(t)
	uri := testURI(t)
	tests := map[string]struct {
		env     []string
		wantRC  int
		wantOut string
	}{
		"incomplete checkpoint": {
			env:     []string{"DLC_RESUME_FROM=" + uri + "/000000000063"},
			wantRC:  1,
			wantOut: "checkpoint: no complete checkpoint at " + uri + "/000000000063",
		},
		"not a ref": {
			env:     []string{"DLC_RESUME_FROM=" + uri},
			wantRC:  2,
			wantOut: "DLC_RESUME_FROM: checkpoint: invalid URI",
		},
		"bad params": {
			env:     []string{`DLC_PARAMS={"lr": "fast"}`},
			wantRC:  2,
			wantOut: `DLC_PARAMS: "lr": want a number, got "fast"`,
		},
	}
	// A save that died before its manifest.
	if err := s3Put(uri+"/000000000063/model.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := start(t, append(s3Env(), tc.env...), "--epochs", "2")
			if rc := p.wait(t, time.Minute); rc != tc.wantRC {
				t.Errorf("exit status %d, want %d", rc, tc.wantRC)
			}
			if !strings.Contains(p.out.String(), tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, p.out.String())
			}
		})
	}
}

// s3Put writes one object, bypassing the checkpoint package.
func s3Put(uri string, data []byte) error {
	bucket, key, err := checkpoint.ParseURI(uri)
	if err != nil {
		return err
	}
	_, err = s3Srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	return err
}

var uriSeq atomic.Int64

// testURI is a checkpoint location private to the test, and to this run of it (-count=N
// shares the server between runs).
func testURI(t *testing.T) string {
	return fmt.Sprintf("s3://dlc/checkpoints/%s-%d", t.Name(), uriSeq.Add(1))
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
