package integration

// Real PyTorch programs (examples/pytorch) on the local backend, with Debian's
// python3-torch (`task deps`): DistributedDataParallel over gloo with checkpoints written
// by the Python library, torchrun resolving its rendezvous from the environment OpenDLC
// gives, recovery from a SIGKILLed replica, and an experiment whose trials ASHA prunes.
// Every test checks torch.distributed's own results (the all-reduce sums, identical
// parameters on every rank), not only exit codes.

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// torchCheck runs once: whether Debian's Python has torch.
var torchCheck = sync.OnceValue(func() error {
	if out, err := exec.Command(python, "-c", "import torch, torch.distributed, boto3").CombinedOutput(); err != nil {
		return fmt.Errorf("the PyTorch tests need %s with torch and boto3 (Debian packages python3-torch, python3-boto3): run `task deps` (%w: %s)", python, err, out)
	}
	return nil
})

// requireTorch fails (never skips) when Debian's torch is missing.
func requireTorch(t *testing.T) {
	t.Helper()
	requirePython(t)
	if err := torchCheck(); err != nil {
		t.Fatal(err)
	}
}

// torchExample reads examples/pytorch/<file> and makes it runnable from the test's
// working directory: the program paths and PYTHONPATH become absolute; then each pair of
// replacements is applied once (each old string must be there).
func torchExample(t *testing.T, file string, replace ...string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "examples", "pytorch"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.ReplaceAll(string(data), "examples/pytorch/", dir+"/")
	pairs := append([]string{
		"{name: PYTHONPATH, value: python}", fmt.Sprintf("{name: PYTHONPATH, value: %q}", pythonDir(t)),
	}, replace...)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(spec, pairs[i]) {
			t.Fatalf("%s no longer contains %q", file, pairs[i])
		}
		spec = strings.Replace(spec, pairs[i], pairs[i+1], 1)
	}
	return spec
}

// What the DDP program prints (examples/pytorch/ddp/train.py). Not anchored: torchrun
// prefixes its children's lines with "[default<N>]:".
var (
	allReduceLine = regexp.MustCompile(`first all_reduce: rank=(\d+) world=(\d+) sum=(\S+) expected=(\d+) backend=(\S+) unix_ns=(\d+)`)
	paramsLine    = regexp.MustCompile(`params rank=(\d+) sha256=([0-9a-f]{64})`)
	finalLine     = regexp.MustCompile(`^final step=(\d+) loss=(\S+)$`)
	torchResumed  = regexp.MustCompile(`^resumed from (\S+) at step (\d+)$`)
	probeLine     = regexp.MustCompile(`^torchrun resolves: nnodes=(\S+) node_rank=(\d+) master_addr=(\S+) master_port=(\d+) nproc_per_node=(\S+) rdzv_backend=(\S+)$`)
	probeEnvLine  = regexp.MustCompile(`^replica env: MASTER_ADDR=(\S*) MASTER_PORT=(\d*) NODE_RANK=(\d*) WORLD_SIZE=(\d*)$`)
	versionsLine  = regexp.MustCompile(`^versions: (.*)$`)
)

// torchRun is what one attempt of a DDP job printed.
type torchRun struct {
	allReduce map[int]string // rank → "world=W sum=S expected=E"
	backend   string
	params    map[int]string // rank → sha256 of its parameters
	losses    []float64      // rank 0's loss per reported step, in order
	steps     []int64
	final     float64
	finalStep int64
	resumed   string // "<ref> <step>", when it resumed
}

// ddpOutput collects what each attempt of a DDP job printed.
func ddpOutput(t *testing.T, ctx context.Context, ws, name string) map[int]*torchRun {
	t.Helper()
	return ddpRuns(jobLogs(t, ctx, ws, name))
}

// ddpRuns collects what each attempt of a DDP job printed, from its log records.
func ddpRuns(logs []events.LogRecord) map[int]*torchRun {
	out := map[int]*torchRun{}
	for _, r := range logs {
		run := out[r.Attempt]
		if run == nil {
			run = &torchRun{allReduce: map[int]string{}, params: map[int]string{}, final: math.NaN()}
			out[r.Attempt] = run
		}
		if m := allReduceLine.FindStringSubmatch(r.Line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			run.allReduce[rank] = fmt.Sprintf("world=%s sum=%s expected=%s", m[2], m[3], m[4])
			run.backend = m[5]
		}
		if m := paramsLine.FindStringSubmatch(r.Line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			run.params[rank] = m[2]
		}
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			run.steps = append(run.steps, int64(vals["step"]))
			run.losses = append(run.losses, vals["loss"])
		}
		if m := finalLine.FindStringSubmatch(r.Line); m != nil {
			run.finalStep, _ = strconv.ParseInt(m[1], 10, 64)
			run.final, _ = strconv.ParseFloat(m[2], 64)
		}
		if m := torchResumed.FindStringSubmatch(r.Line); m != nil && r.Index == 0 && r.Role == "master" {
			run.resumed = m[1] + " " + m[2]
		}
	}
	return out
}

// checkCollectives checks torch.distributed's own results in one attempt: every rank of
// world did its first all-reduce with the right sum, and every rank ended with the same
// parameters.
func checkCollectives(t *testing.T, what string, run *torchRun, world int) {
	t.Helper()
	want := map[int]string{}
	for rank := range world {
		want[rank] = fmt.Sprintf("world=%d sum=%d expected=%d", world, world*(world+1)/2, world*(world+1)/2)
	}
	if diff := cmp.Diff(want, run.allReduce); diff != "" {
		t.Errorf("%s: first all-reduce per rank (-want +got):\n%s", what, diff)
	}
	if len(run.params) != world {
		t.Errorf("%s: parameter digests of %d ranks, want %d: %v", what, len(run.params), world, run.params)
	}
	for rank, h := range run.params {
		if h != run.params[0] {
			t.Errorf("%s: rank %d's parameters differ from rank 0's (%s vs %s)", what, rank, h, run.params[0])
		}
	}
}

// mustSucceed waits for a job to end and fails the test, with its logs, unless it
// succeeded.
func mustSucceed(t *testing.T, ctx context.Context, ws, name string) *api.Job {
	t.Helper()
	j := waitTerminal(t, ctx, ws, name)
	if j.Status.Phase != schemas.JobSucceeded {
		for _, r := range jobLogs(t, ctx, ws, name) {
			t.Logf("[%s a%d] %s", r.Replica, r.Attempt, r.Line)
		}
		t.Fatalf("job %s: phase %s (%s: %s), want Succeeded", name, j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	return j
}

// checkDDPCheckpoints checks the checkpoints of a DDP example job of steps steps that
// saved every 5 with keep 3: the last three complete in S3, the newest the job's last
// checkpoint and loadable by Go with the model's state. It returns that one's manifest
// and the steps kept.
func checkDDPCheckpoints(t *testing.T, ctx context.Context, store *checkpoint.Store, uri string, j *api.Job, steps int64) (checkpoint.Manifest, []int64) {
	t.Helper()
	ms, err := store.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	var kept []int64
	for _, m := range ms {
		kept = append(kept, m.Step)
	}
	if diff := cmp.Diff([]int64{steps - 10, steps - 5, steps}, kept); diff != "" {
		t.Errorf("complete checkpoints after success (keep: 3) (-want +got):\n%s", diff)
	}
	if j.Status.LastCheckpoint != checkpoint.RefFor(uri, steps) {
		t.Errorf("last checkpoint %q, want step %d's", j.Status.LastCheckpoint, steps)
	}
	m, files, err := store.Load(ctx, checkpoint.RefFor(uri, steps))
	if err != nil || len(files["state.pt"]) == 0 {
		t.Fatalf("Go load of step %d: %v (files %d)", steps, err, len(files))
	}
	return m, kept
}

// The DDP example, 1 master + 2 workers on gloo: every rank's first all-reduce sums
// rank+1 over the 3 ranks to 6, the parameters end identical on every rank, rank 0
// reports a falling loss every step, and the checkpoints the Python library wrote every
// 5 steps are complete in S3, kept to spec.checkpoint.keep and loadable by Go.
func TestPyTorchDDPCheckpoints(t *testing.T) {
	requireTorch(t)
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	uri := fmt.Sprintf("s3://dlc/%s/ddp", ws)
	const steps = 20
	submit(t, ctx, torchExample(t, "ddp/job.yaml",
		"metadata: {name: torch-ddp, workspace: default,", fmt.Sprintf("metadata: {name: ddp, workspace: %s,", ws),
		`--steps, "40"`, fmt.Sprintf(`--steps, "%d"`, steps),
		"s3://dlc/workspaces/default/checkpoints/torch-ddp", uri))
	j := mustSucceed(t, ctx, ws, "ddp")
	runs := ddpOutput(t, ctx, ws, "ddp")
	run := runs[0]
	if len(runs) != 1 || run == nil {
		for _, a := range j.Status.Attempts {
			t.Logf("attempt %d: %s %s on %s: %s", a.Attempt, a.Outcome, a.Class, a.Replica, a.Message)
		}
		t.Fatalf("attempts in the logs: %d, want 1", len(runs))
	}
	checkCollectives(t, "ddp", run, 3)
	wantSteps := make([]int64, steps)
	for i := range wantSteps {
		wantSteps[i] = int64(i + 1)
	}
	if diff := cmp.Diff(wantSteps, run.steps); diff != "" {
		t.Errorf("rank 0's reported steps (-want +got):\n%s", diff)
	}
	if len(run.losses) != steps || !(run.losses[steps-1] < run.losses[0]/2) || run.final != run.losses[steps-1] {
		t.Errorf("losses %v, final %v: want the last under half the first, and the final line to match it", run.losses, run.final)
	}

	m, kept := checkDDPCheckpoints(t, ctx, env.store, uri, j, steps)
	if got := m.Metrics["loss"]; got != run.losses[steps-1] {
		t.Errorf("checkpoint metrics loss %v, rank 0 reported %v", got, run.losses[steps-1])
	}
	t.Logf("backend %s; loss %.4f at step 1 → %.4f at step %d; params sha256 %.16s on all 3 ranks; checkpoints kept %v",
		run.backend, run.losses[0], run.final, steps, run.params[0], kept)
}

// torchrun on each of 2 replicas with no rendezvous flags: its own argument parser,
// inside a real replica, resolves nnodes, the node rank, the master address and port and
// the processes per node from the environment OpenDLC gives; then the full launcher runs
// 2 processes per replica (world size 4) whose first all-reduce sums to 10 on every rank.
func TestPyTorchTorchrunResolvesFromEnvironment(t *testing.T) {
	requireTorch(t)
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	submit(t, ctx, torchExample(t, "torchrun/job.yaml",
		"metadata: {name: torchrun, workspace: default,", fmt.Sprintf("metadata: {name: torchrun, workspace: %s,", ws)))
	mustSucceed(t, ctx, ws, "torchrun")

	type resolved struct{ nnodes, nodeRank, addr, port, perNode, rdzv string }
	probes := map[int]resolved{}
	envs := map[int][]string{}
	var versions string
	for _, r := range jobLogs(t, ctx, ws, "torchrun") {
		if m := probeLine.FindStringSubmatch(r.Line); m != nil {
			probes[r.Index] = resolved{m[1], m[2], m[3], m[4], m[5], m[6]}
		}
		if m := probeEnvLine.FindStringSubmatch(r.Line); m != nil {
			envs[r.Index] = m[1:]
		}
		if m := versionsLine.FindStringSubmatch(r.Line); m != nil {
			versions = m[1]
		}
	}
	if len(probes) != 2 || len(envs) != 2 {
		t.Fatalf("probe lines of replicas %v and %v, want 2 each", probes, envs)
	}
	port := envs[0][1]
	for i := range 2 {
		want := resolved{nnodes: "2", nodeRank: strconv.Itoa(i), addr: envs[0][0], port: port, perNode: "1", rdzv: "static"}
		if probes[i] != want || envs[i][0] != envs[0][0] || envs[i][1] != port || envs[i][2] != strconv.Itoa(i) {
			t.Errorf("worker-%d: torchrun resolves %+v with env %v, want %+v (the leader's address and port, node rank %d)",
				i, probes[i], envs[i], want, i)
		}
	}
	if envs[0][0] == "" || port == "" || port == "0" {
		t.Errorf("rendezvous env %v: want a master address and port", envs[0])
	}

	runs := ddpOutput(t, ctx, ws, "torchrun")
	if runs[0] == nil {
		t.Fatal("no output of the launched processes")
	}
	checkCollectives(t, "torchrun --nproc_per_node=2 on 2 replicas", runs[0], 4)
	t.Logf("%s: torchrun resolved %+v and %+v; the launcher ran world size 4 (all-reduce %v)", versions, probes[0], probes[1], runs[0].allReduce)
}

// ddpRecoverySpec is the DDP example as a 30-step job that sleeps after each step (so
// that a kill lands mid-run), its shell printing the replica's pid before becoming the
// program.
func ddpRecoverySpec(t *testing.T, ws, name, uri string) string {
	return torchExample(t, "ddp/job.yaml",
		"metadata: {name: torch-ddp, workspace: default,", fmt.Sprintf("metadata: {name: %s, workspace: %s,", name, ws),
		"command: [/usr/bin/python3,", `command: [sh, -c, 'echo pid=$$; exec "$0" "$@"', /usr/bin/python3,`,
		`--steps, "40"`, `--steps, "30", --step-sleep, "0.25"`,
		"s3://dlc/workspaces/default/checkpoints/torch-ddp", uri)
}

// One replica of the DDP job SIGKILLed mid-run, after a complete checkpoint: the job
// restarts once from the newest complete checkpoint the Python library wrote, the step
// count continues from it, and the final loss matches (within 1%) an uninterrupted run of
// the same seed, run alongside.
func TestPyTorchRecoveryResumesFromPythonCheckpoint(t *testing.T) {
	requireTorch(t)
	ctx := itest.Context(t, 5*time.Minute)
	ws := workspace(t)
	uri, refURI := fmt.Sprintf("s3://dlc/%s/killed", ws), fmt.Sprintf("s3://dlc/%s/reference", ws)
	submit(t, ctx, ddpRecoverySpec(t, ws, "reference", refURI))
	submit(t, ctx, ddpRecoverySpec(t, ws, "killed", uri))

	// The victim: worker-1 (rank 2) of attempt 0, once a checkpoint is complete.
	var pid int
	var victim string
	testutil.Eventually(t, itest.Left(ctx), "worker-1 of attempt 0 to print its pid", func() bool {
		for _, r := range jobLogs(t, ctx, ws, "killed") {
			if v, ok := strings.CutPrefix(r.Line, "pid="); ok && r.Attempt == 0 && r.Role == "worker" && r.Index == 1 {
				pid, _ = strconv.Atoi(v)
				victim = r.Replica
			}
		}
		return pid != 0
	}, itest.PollInterval)
	var first checkpoint.Manifest
	testutil.Eventually(t, itest.Left(ctx), "a complete checkpoint", func() error {
		var err error
		first, err = env.store.Latest(ctx, uri)
		return err
	}, 50*time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (pid %d): %v", victim, pid, err)
	}
	t.Logf("killed %s (pid %d) once step %d was complete", victim, pid, first.Step)

	st := mustSucceed(t, ctx, ws, "killed").Status
	ref := mustSucceed(t, ctx, ws, "reference")
	// The fault happened: attempt 0 ended by the kill of the victim, and a second
	// attempt ran.
	if st.Restarts != 1 || len(st.Attempts) != 2 {
		t.Fatalf("restarts %d, attempts %+v: want one restart", st.Restarts, st.Attempts)
	}
	a0, a1 := st.Attempts[0], st.Attempts[1]
	if a0.Class != schemas.FailureSignal || a0.Replica != victim || !strings.Contains(a0.Message, "SIGKILL") {
		t.Errorf("attempt 0: class %s replica %s message %q, want Signal on %s naming SIGKILL", a0.Class, a0.Replica, a0.Message, victim)
	}
	if ref.Status.Restarts != 0 {
		t.Errorf("the reference job restarted %d times", ref.Status.Restarts)
	}

	runs := ddpOutput(t, ctx, ws, "killed")
	before, after := runs[0], runs[1]
	if before == nil || after == nil {
		t.Fatalf("logs of attempts %d, want 0 and 1", len(runs))
	}
	_, step, err := checkpoint.ParseRef(a1.ResumedFrom)
	if err != nil || step < first.Step {
		t.Fatalf("attempt 1 resumed from %q (%v), want a checkpoint of %s at step >= %d", a1.ResumedFrom, err, uri, first.Step)
	}
	if want := fmt.Sprintf("%s %d", a1.ResumedFrom, step); after.resumed != want {
		t.Errorf("attempt 1's rank 0 says it resumed from %q, want %q", after.resumed, want)
	}
	// Attempt 0 was mid-run when killed: it had reported steps past the checkpoint it
	// resumes from but not the last one.
	lastBefore := before.steps[len(before.steps)-1]
	if lastBefore >= 30 {
		t.Errorf("attempt 0 reported step %d: the kill did not land mid-run", lastBefore)
	}
	// The step count continues from the checkpoint and runs to the end.
	if len(after.steps) == 0 || after.steps[0] != step+1 || after.finalStep != 30 || after.steps[len(after.steps)-1] != 30 {
		t.Errorf("attempt 1 reported steps %v (final %d), want %d..30", after.steps, after.finalStep, step+1)
	}
	checkCollectives(t, "attempt 1", after, 3)
	refRun := ddpOutput(t, ctx, ws, "reference")[0]
	checkCollectives(t, "reference", refRun, 3)
	if refRun.finalStep != 30 || math.IsNaN(refRun.final) || math.IsNaN(after.final) {
		t.Fatalf("final losses: reference %v (step %d), resumed %v", refRun.final, refRun.finalStep, after.final)
	}
	if rel := math.Abs(after.final-refRun.final) / refRun.final; rel > 0.01 {
		t.Errorf("final loss %v after recovery, %v uninterrupted: %.3f%% apart, want within 1%%", after.final, refRun.final, 100*rel)
	}
	// Where both runs reported the same step after the resume point, they agree.
	for i, s := range after.steps {
		if k := slices.Index(refRun.steps, s); k >= 0 && math.Abs(after.losses[i]-refRun.losses[k]) > 0.01*refRun.losses[k] {
			t.Errorf("step %d: loss %v after recovery, %v uninterrupted", s, after.losses[i], refRun.losses[k])
		}
	}
	t.Logf("attempt 0 reached step %d; resumed from step %d (%s); first resumed step %d; final loss %.6f resumed vs %.6f uninterrupted",
		lastBefore, step, a1.ResumedFrom, after.steps[0], after.final, refRun.final)
}

// An experiment whose trials are the DDP job (3 replicas each), over lr and the hidden
// width, 2 at a time: ASHA prunes at least one trial at a rung before the last step, and
// the best trial is reported with the loss its job printed. The example's grid ends with
// the trial that is worst at both rungs, so the prune does not depend on the order in
// which the first three trials' reports arrive.
func TestPyTorchExperimentASHAPrunes(t *testing.T) {
	requireTorch(t)
	ctx := itest.Context(t, 6*time.Minute)
	ws := workspace(t)
	spec := torchExample(t, "experiment.yaml",
		"metadata: {name: tune-torch-ddp, workspace: default,", fmt.Sprintf("metadata: {name: tune, workspace: %s,", ws))
	if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	x := waitExperiment(t, ctx, env.api, ws, "tune")
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 4 || st.Failed != 0 || st.BestTrial == nil || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d pruned, %d failed", st.Phase, st.Message,
			len(st.Trials), st.Completed, st.Pruned, st.Failed)
	}
	if st.Pruned < 1 || st.Trials[3].Phase != schemas.TrialPruned {
		t.Errorf("no trial pruned by ASHA: %+v (the last trial, the worst at both rungs, must be one)", st.Trials)
	}
	for _, tr := range st.Trials {
		runs := ddpOutput(t, ctx, ws, tr.Job)
		run := runs[0]
		if run == nil || len(run.steps) == 0 {
			t.Errorf("trial %d (%s): no metric lines", tr.ID, tr.Job)
			continue
		}
		last := run.steps[len(run.steps)-1]
		t.Logf("trial %d %v: %s at step %d (%s); its job reported up to step %d, loss %.4f", tr.ID, tr.Params, tr.Phase, tr.Step, tr.Message,
			last, run.losses[len(run.losses)-1])
		if len(run.allReduce) != 3 {
			t.Errorf("trial %d: first all-reduce of %d ranks, want 3: %v", tr.ID, len(run.allReduce), run.allReduce)
		}
		switch tr.Phase {
		case schemas.TrialPruned:
			// Pruned at a rung before the last step; its job is stopped then, and
			// reports a few more steps while the stop travels.
			if tr.Step >= 20 || !strings.Contains(tr.Message, "asha") {
				t.Errorf("pruned trial %d: at step %d (%q), want a rung before step 20 named by rule asha", tr.ID, tr.Step, tr.Message)
			}
			if last >= 20 {
				t.Logf("pruned trial %d's job had reached step %d when the stop arrived", tr.ID, last)
			}
		case schemas.TrialCompleted:
			checkCollectives(t, fmt.Sprintf("trial %d", tr.ID), run, 3)
			if last != 20 {
				t.Errorf("completed trial %d ended at step %d, want 20", tr.ID, last)
			}
		}
	}
	best := st.Trials[*st.BestTrial]
	bestRun := ddpOutput(t, ctx, ws, best.Job)[0]
	if best.Phase != schemas.TrialCompleted || bestRun == nil || bestRun.final != *st.BestValue {
		t.Errorf("best trial %d (%s): status says loss %v, its job's final loss %v", best.ID, best.Phase, *st.BestValue, bestRun)
	}
	t.Logf("%d completed, %d pruned; best trial %d %v loss %.4f", st.Completed, st.Pruned, best.ID, best.Params, *st.BestValue)
}
