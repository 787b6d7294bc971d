package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/internal/testutil"
)

// Before takeOver a signal stops the run at once; after it, the first signal is only a
// notice and the second stops the run.
func TestNoticeDeliver(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	n := newNotice(cancel)
	n.deliver(syscall.SIGTERM)
	if ctx.Err() == nil {
		t.Fatal("a signal before takeOver did not cancel the run")
	}
	if n.takeOver() {
		t.Error("takeOver after the signal reported true")
	}
	if sig, _ := n.received(); sig != syscall.SIGTERM || exitCode(sig) != 143 {
		t.Errorf("received %v (exit code %d), want SIGTERM (143)", sig, exitCode(sig))
	}

	ctx, cancel = context.WithCancelCause(context.Background())
	n = newNotice(cancel)
	if !n.takeOver() {
		t.Fatal("takeOver before any signal reported false")
	}
	n.deliver(syscall.SIGINT)
	select {
	case <-n.c:
	default:
		t.Fatal("the notice channel is open after the first signal")
	}
	if ctx.Err() != nil {
		t.Fatalf("the first signal after takeOver cancelled the run: %v", context.Cause(ctx))
	}
	n.deliver(syscall.SIGTERM)
	if ctx.Err() == nil {
		t.Fatal("a second signal did not cancel the run")
	}
	if sig, _ := n.received(); sig != syscall.SIGINT || exitCode(sig) != 130 || signalName(sig) != "SIGINT" {
		t.Errorf("received %v, want the first signal, SIGINT (130)", sig)
	}
	if got := context.Cause(ctx).Error(); !strings.Contains(got, "second signal, SIGTERM") {
		t.Errorf("cause %q", got)
	}
}

var noticeLine = regexp.MustCompile(`(?m)^dlc:notice signal=(\S+) step=(\d+)$`)

// noticeOf checks out's notice line and the dlc:checkpoint line of the same step that
// must follow it, and returns that step and ref.
func noticeOf(t *testing.T, out string) (step int64, ref string) {
	t.Helper()
	loc := noticeLine.FindStringSubmatchIndex(out)
	if loc == nil {
		t.Fatalf("no notice line in the output:\n%s", out)
	}
	if sig := out[loc[2]:loc[3]]; sig != "SIGTERM" {
		t.Errorf("notice line names %s, want SIGTERM", sig)
	}
	step, _ = strconv.ParseInt(out[loc[4]:loc[5]], 10, 64)
	after := checkpointLine.FindAllStringSubmatch(out[loc[1]:], -1)
	if len(after) != 1 || after[0][1] != strconv.FormatInt(step, 10) {
		t.Fatalf("after the notice at step %d, checkpoint lines %q, want one of that step:\n%s", step, after, out)
	}
	return step, after[0][2]
}

// stateAt reads the state.json of a checkpoint.
func stateAt(t *testing.T, s *checkpoint.Store, ref string) stateCheckpoint {
	t.Helper()
	m, files, err := s.Load(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	var sc stateCheckpoint
	if err := json.Unmarshal(files[stateFile], &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Step != m.Step {
		t.Fatalf("%s: state.json step %d, manifest %d", ref, sc.Step, m.Step)
	}
	return sc
}

// waitForEpoch waits until p has reported epoch want.
func waitForEpoch(t *testing.T, p *proc, want int) {
	t.Helper()
	testutil.Eventually(t, time.Minute, fmt.Sprintf("epoch %d reported", want), func() error {
		if e := epochsReported(p.out.String()); len(e) > 0 && e[len(e)-1] >= want {
			return nil
		}
		return fmt.Errorf("so far:\n%s", p.out.String())
	}, 20*time.Millisecond)
}

// TestNoticeCheckpointAndResume sends SIGTERM to a single-process trainer mid-run, with
// checkpoints only every 4 epochs: it exits 143 with a final checkpoint at the step of its
// last epoch, announced by the notice line, and a second run resumed from it trains the
// next epochs and ends with the weights of an uninterrupted run.
func TestNoticeCheckpointAndResume(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	uri := testURI(t)
	env := append(s3Env(), "DLC_CHECKPOINT_URI="+uri)

	first := start(t, env, "--epochs", "200", "--epoch-sleep", "150ms", "--checkpoint-every", "4")
	waitForEpoch(t, first, 5)
	signalled := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rc := first.wait(t, 30*time.Second)
	t.Logf("exited %d, %s after SIGTERM", rc, time.Since(signalled).Round(time.Millisecond))
	out := first.out.String()
	if rc != 143 {
		t.Fatalf("exit status %d after SIGTERM, want 143:\n%s", rc, out)
	}
	epochs := epochsReported(out)
	last := epochs[len(epochs)-1]
	if last >= 200 {
		t.Fatal("the run finished before the signal")
	}
	step, ref := noticeOf(t, out)
	lastMetric := metricLine.FindAllStringSubmatch(out, -1)
	if got := lastMetric[len(lastMetric)-1][2]; got != strconv.FormatInt(step, 10) {
		t.Errorf("notice at step %d, but the last epoch reported ended at step %s (an epoch after the notice?)", step, got)
	}
	if strings.Index(out, noticeLine.FindString(out)) < strings.LastIndex(out, "dlc:metric") {
		t.Errorf("a metric line follows the notice line:\n%s", out)
	}
	if want := fmt.Sprintf("%s/%012d", uri, step); ref != want {
		t.Errorf("final checkpoint %s, want %s", ref, want)
	}
	latest, err := s.Latest(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Step != step || latest.Ref != ref {
		t.Errorf("newest complete checkpoint %s (step %d), want %s", latest.Ref, latest.Step, ref)
	}
	if sc := stateAt(t, s, ref); sc.Epoch != last || latest.Metrics["epoch"] != float64(last) {
		t.Errorf("final checkpoint holds epoch %d (manifest %v), want %d", sc.Epoch, latest.Metrics["epoch"], last)
	}
	if last%4 != 0 && !strings.Contains(out, "final checkpoint saved on the notice") {
		t.Errorf("epoch %d is not a multiple of 4, yet the trainer does not say it saved on the notice:\n%s", last, out)
	}

	// Resume: the first epoch trained is the one after the checkpoint.
	second := start(t, append(env, "DLC_RESUME_FROM="+ref), "--epochs", strconv.Itoa(last+2), "--checkpoint-every", "4")
	if rc := second.wait(t, time.Minute); rc != 0 {
		t.Fatalf("resumed run exited %d:\n%s", rc, second.out.String())
	}
	out2 := second.out.String()
	if want := fmt.Sprintf("resumed from %s: epoch %d, step %d", ref, last, step); !strings.Contains(out2, want) {
		t.Errorf("resumed run's output lacks %q:\n%s", want, out2)
	}
	if diff := cmp.Diff([]int{last + 1, last + 2}, epochsReported(out2)); diff != "" {
		t.Errorf("epochs after resuming (-want +got):\n%s", diff)
	}
	perEpoch := step / int64(last)
	if sc := stateAt(t, s, fmt.Sprintf("%s/%012d", uri, step+2*perEpoch)); sc.Epoch != last+2 {
		t.Errorf("the resumed run's last checkpoint holds epoch %d, want %d", sc.Epoch, last+2)
	}

	// Stopping on the notice and resuming changes nothing.
	oneGoURI := uri + "-one-go"
	oneGo := start(t, append(s3Env(), "DLC_CHECKPOINT_URI="+oneGoURI), "--epochs", strconv.Itoa(last+2), "--checkpoint-every", "4")
	if rc := oneGo.wait(t, time.Minute); rc != 0 {
		t.Fatalf("uninterrupted run exited %d:\n%s", rc, oneGo.out.String())
	}
	if diff := cmp.Diff(finalModel(t, s, oneGoURI), finalModel(t, s, uri)); diff != "" {
		t.Errorf("noticed and resumed training differs from uninterrupted training (-one go +resumed):\n%s", diff)
	}
}

// TestNoticeDataParallel signals both ranks of a data-parallel job at once, as a
// preemption does: rank 1 exits 143 without saving, rank 0 exits 143 after a final
// checkpoint of an epoch both ranks completed, whether it was told before or after its
// peer left, and both resume from it.
func TestNoticeDataParallel(t *testing.T) {
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
	ranks := launch(nil, "--epochs", "200", "--epoch-sleep", "100ms", "--checkpoint-every", "3", "--async-checkpoint")
	waitForEpoch(t, ranks[0], 4)
	for _, p := range []*proc{ranks[1], ranks[0]} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for rank, p := range ranks {
		if rc := p.wait(t, 30*time.Second); rc != 143 {
			t.Errorf("rank %d exited %d after SIGTERM, want 143:\n%s", rank, rc, p.out.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if strings.Contains(ranks[1].out.String(), "dlc:") {
		t.Errorf("rank 1 printed contract lines:\n%s", ranks[1].out.String())
	}
	out := ranks[0].out.String()
	step, ref := noticeOf(t, out)
	sc := stateAt(t, s, ref)
	epochs := epochsReported(out)
	if sc.Epoch < 4 || sc.Epoch > epochs[len(epochs)-1] {
		t.Errorf("final checkpoint of epoch %d; rank 0 reported epochs %v", sc.Epoch, epochs)
	}
	latest, err := s.Latest(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Step != step {
		t.Errorf("newest complete checkpoint at step %d, the notice says %d", latest.Step, step)
	}
	t.Logf("rank 0 stopped at epoch %d, step %d; resuming from %s", sc.Epoch, step, ref)

	ranks = launch([]string{"DLC_RESUME_FROM=" + ref}, "--epochs", strconv.Itoa(sc.Epoch+2))
	for rank, p := range ranks {
		if rc := p.wait(t, time.Minute); rc != 0 {
			t.Fatalf("resumed rank %d exited %d:\n%s", rank, rc, p.out.String())
		}
	}
	if diff := cmp.Diff([]int{sc.Epoch + 1, sc.Epoch + 2}, epochsReported(ranks[0].out.String())); diff != "" {
		t.Errorf("epochs reported after resuming (-want +got):\n%s", diff)
	}
	if want := fmt.Sprintf("rank 1: starting after epoch %d, step %d", sc.Epoch, step); !strings.Contains(ranks[1].out.String(), want) {
		t.Errorf("rank 1's output lacks %q:\n%s", want, ranks[1].out.String())
	}
}

// Without DLC_CHECKPOINT_URI, or with --notice-checkpoint=false, a signal stops the
// trainer at once, as before: exit 143 and no notice line.
func TestNoNoticeCheckpoint(t *testing.T) {
	fixtures(t)
	uri := testURI(t)
	for name, env := range map[string][]string{
		"no checkpoint URI": nil,
		"flag off":          {"DLC_CHECKPOINT_URI=" + uri},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"--epochs", "200", "--epoch-sleep", "150ms"}
			if env != nil {
				args = append(args, "--notice-checkpoint=false")
			}
			p := start(t, append(s3Env(), env...), args...)
			waitForEpoch(t, p, 2)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if rc := p.wait(t, 30*time.Second); rc != 143 {
				t.Errorf("exit status %d, want 143", rc)
			}
			if out := p.out.String(); strings.Contains(out, "dlc:notice") {
				t.Errorf("a notice line without notice checkpoints:\n%s", out)
			}
		})
	}
}

// A rank 0 stuck in an exchange with a peer that neither answers nor exits (a hung
// process, a partitioned node) still ends within noticeWait of the notice, rather than
// waiting past the grace period, and checkpoints what every rank completed: here nothing.
func TestNoticeSilentPeer(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	train, test := shippedData(t)
	groups := formGroup(t, ctx, 2) // rank 1's group never takes part in an exchange
	n := newNotice(cancel)
	cfg := testConfig(Params{LR: 0.2, Epochs: 5, BatchSize: 32, L2: 1e-4})
	cfg.CheckpointURI, cfg.NoticeCheckpoint = "s3://dlc/never-written", true
	var out syncBuffer
	tr := &trainer{cfg: cfg, train: train, test: test, group: groups[0], out: &out, log: &out, notice: n}
	type ended struct {
		err error
		at  time.Time
	}
	done := make(chan ended, 1)
	go func() {
		_, err := tr.run(ctx)
		done <- ended{err, time.Now()}
	}()
	select {
	case e := <-done:
		t.Fatalf("rank 0 ended before the notice: %v\n%s", e.err, out.String())
	case <-time.After(300 * time.Millisecond): // blocked in epoch 1's exchange
	}
	n.deliver(syscall.SIGTERM)
	noticed := time.Now()
	var e ended
	select {
	case e = <-done:
	case <-time.After(noticeWait + 10*time.Second):
		t.Fatalf("rank 0 still waiting on its silent peer %s after the notice:\n%s", noticeWait+10*time.Second, out.String())
	}
	var taken *noticeTaken
	if !errors.As(e.err, &taken) || taken.step != 0 {
		t.Fatalf("run ended with %v, want a notice taken at step 0\n%s", e.err, out.String())
	}
	if took := e.at.Sub(noticed); took < noticeWait-100*time.Millisecond {
		t.Errorf("rank 0 gave up on its peer %s after the notice, before noticeWait (%s)", took, noticeWait)
	}
	if ctx.Err() != nil {
		t.Errorf("the notice cancelled the run's context: %v", context.Cause(ctx))
	}
	if got := out.String(); !strings.Contains(got, "dlc:notice signal=SIGTERM step=0\n") || strings.Contains(got, "dlc:checkpoint") {
		t.Errorf("output:\n%s", got)
	}
}

// A peer that exits before rank 0 gets its own signal (a preemption signals every
// replica, not at the same instant): rank 0 waits for its signal and then takes the
// notice; without a signal, the failure stands.
func TestNoticeAfterPeerLeft(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	for _, signalRankZero := range []bool{true, false} {
		t.Run(fmt.Sprintf("rank 0 signalled=%v", signalRankZero), func(t *testing.T) {
			uri := testURI(t)
			port := freePort(t)
			var ranks []*proc
			for rank := range 2 {
				env := append(s3Env(), "DLC_CHECKPOINT_URI="+uri, "WORLD_SIZE=2", "RANK="+strconv.Itoa(rank),
					"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
				ranks = append(ranks, start(t, env, "--epochs", "200", "--epoch-sleep", "100ms", "--checkpoint-every", "2"))
			}
			waitForEpoch(t, ranks[0], 3)
			if err := ranks[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if rc := ranks[1].wait(t, 30*time.Second); rc != 143 {
				t.Fatalf("rank 1 exited %d after SIGTERM, want 143", rc)
			}
			// The fault: rank 0's exchange failed on its departed peer.
			testutil.Eventually(t, 30*time.Second, "rank 0 to find its peer gone", func() error {
				if out := ranks[0].out.String(); !strings.Contains(out, "waiting up to 5s for a stop signal") {
					return fmt.Errorf("so far:\n%s", out)
				}
				return nil
			}, 20*time.Millisecond)
			if !signalRankZero {
				rc := ranks[0].wait(t, 30*time.Second)
				if out := ranks[0].out.String(); rc != 1 || !strings.Contains(out, "did it exit?") || strings.Contains(out, "dlc:notice") {
					t.Errorf("rank 0 exited %d, want 1 with the peer's failure and no notice:\n%s", rc, out)
				}
				return
			}
			if err := ranks[0].cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if rc := ranks[0].wait(t, 30*time.Second); rc != 143 {
				t.Fatalf("rank 0 exited %d after SIGTERM, want 143", rc)
			}
			out := ranks[0].out.String()
			step, ref := noticeOf(t, out)
			metrics := metricLine.FindAllStringSubmatch(out, -1)
			if got := metrics[len(metrics)-1][2]; got != strconv.FormatInt(step, 10) {
				t.Errorf("final checkpoint at step %d, want the last epoch both ranks completed, at step %s", step, got)
			}
			if sc := stateAt(t, s, ref); sc.Step != step {
				t.Errorf("state.json of %s says step %d", ref, sc.Step)
			}
		})
	}
}
