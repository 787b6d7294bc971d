package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// rawS3 is a plain S3 client on the stack's gateway, and the bucket and prefix of uri:
// it writes and lists objects behind the checkpoint package's back.
func rawS3(t *testing.T, uri string) (client *s3.Client, bucket, prefix string) {
	t.Helper()
	return itest.RawS3(t, env.e, uri)
}

// putPartial writes the files of a checkpoint at step under uri without its manifest,
// as a trainer that died while saving leaves it, and returns that step's ref.
func putPartial(t *testing.T, ctx context.Context, uri string, step int64) string {
	t.Helper()
	client, bucket, prefix := rawS3(t, uri)
	for _, name := range []string{"model.json", "state.json"} {
		key := fmt.Sprintf("%s/%0*d/%s", prefix, checkpoint.StepDigits, step, name)
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(`{"half":`)}); err != nil {
			t.Fatal(err)
		}
	}
	return checkpoint.RefFor(uri, step)
}

// stepsStored lists the steps under uri that hold any object, complete or not.
func stepsStored(t *testing.T, ctx context.Context, uri string) []int64 {
	t.Helper()
	client, bucket, prefix := rawS3(t, uri)
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, o := range out.Contents {
		dir, _, _ := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), prefix+"/"), "/")
		step, err := strconv.ParseInt(dir, 10, 64)
		if err != nil {
			t.Fatalf("unexpected object %s", aws.ToString(o.Key))
		}
		if !slices.Contains(steps, step) {
			steps = append(steps, step)
		}
	}
	return steps
}

// metric is a dlc:metric line of rank 0.
type metric struct {
	Attempt     int
	Epoch, Step int64
	Accuracy    float64
	Time        time.Time
}

var resumedLine = regexp.MustCompile(`^resumed from (\S+): epoch (\d+), step (\d+)$`)

// SIGKILL of one replica's process of a 2-replica data-parallel trainer: the attempt is
// classified Signal, the gang is restarted once, from the newest complete checkpoint
// (not from a newer partial one), the trainer resumes with its step count continuing,
// and the job succeeds with a sane model. Nothing is published twice.
func TestRecoveryKilledReplicaResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	// 20 epochs with 400ms between them: attempt 0 outlives the wait for its first
	// checkpoint by seconds even on a loaded machine.
	const name, totalEpochs = "resume", 20
	uri := fmt.Sprintf("s3://dlc/%s/logreg", ws)
	// The shell prints the replica's pid, then becomes the trainer (exec keeps the pid).
	submit(t, ctx, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: pytorch
  command: [sh, -c, 'echo pid=$$; exec "$0" "$@"', %q]
  args: [--epochs, "%d", --lr, "0.2", --epoch-sleep, 400ms, --async-checkpoint]
  roles:
    worker: {replicas: 2, resources: {cpu: "1", memory: 256Mi}}
  checkpoint: {uri: %q, keep: 3}
  faultTolerance: {maxRestarts: 1}
  timeout: 5m
`, env.trainer, totalEpochs, uri)))

	// The victim: rank 1 of attempt 0, once a checkpoint is complete.
	var pid int
	var victim string
	testutil.Eventually(t, itest.Left(ctx), "rank 1 of attempt 0 to print its pid", func() bool {
		for _, r := range jobLogs(t, ctx, ws, name) {
			if v, ok := strings.CutPrefix(r.Line, "pid="); ok && r.Attempt == 0 && r.Index == 1 {
				if pid, _ = strconv.Atoi(v); pid == 0 {
					t.Fatalf("bad pid line %q", r.Line)
				}
				victim = r.Replica
			}
		}
		return pid != 0
	}, itest.PollInterval)
	testutil.Eventually(t, itest.Left(ctx), "a complete checkpoint", func() error {
		_, err := env.store.Latest(ctx, uri)
		return err
	}, 50*time.Millisecond)
	// A save that died half-way, newer than any complete checkpoint: never resumed from.
	partial := putPartial(t, ctx, uri, 1_000_000)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (pid %d): %v", victim, pid, err)
	}
	killed := time.Now()

	st := waitTerminal(t, ctx, ws, name).Status
	if st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s (%s: %s), want Succeeded", st.Phase, st.Reason, st.Message)
	}
	if st.Restarts != 1 || st.Preemptions != 0 || st.Attempt != 1 || len(st.Attempts) != 2 {
		t.Fatalf("restarts %d preemptions %d attempt %d attempts %+v, want one restart", st.Restarts, st.Preemptions, st.Attempt, st.Attempts)
	}
	a0, a1 := st.Attempts[0], st.Attempts[1]
	if a0.Class != schemas.FailureSignal || a0.Action != "Retry" || a0.Replica != victim || a0.Outcome != schemas.JobRestarting {
		t.Errorf("attempt 0: class %s action %s replica %s outcome %s, want Signal, Retry on %s, Restarting",
			a0.Class, a0.Action, a0.Replica, a0.Outcome, victim)
	}
	if !strings.Contains(a0.Message, "SIGKILL") {
		t.Errorf("attempt 0 message %q does not name SIGKILL", a0.Message)
	}
	if a0.Node == "" || !slices.Contains(st.ExcludedNodes, a0.Node) {
		t.Errorf("excluded nodes %v, want the failed replica's node %q", st.ExcludedNodes, a0.Node)
	}
	if a0.FaultTime == nil || a0.ReleasedTime == nil || a1.RunningTime == nil ||
		a0.ReleasedTime.Before(*a0.FaultTime) || a1.RunningTime.Before(*a0.ReleasedTime) {
		t.Errorf("attempt times: fault %v released %v, attempt 1 running %v", a0.FaultTime, a0.ReleasedTime, a1.RunningTime)
	}
	if a1.Outcome != schemas.JobSucceeded {
		t.Errorf("attempt 1 outcome %s", a1.Outcome)
	}

	// What rank 0 printed, per attempt.
	var metrics []metric
	var resumed []string
	var perEpoch int64
	lastSaved := map[int]int64{} // attempt → step of its last dlc:checkpoint line
	for _, r := range jobLogs(t, ctx, ws, name) {
		if r.Index != 0 {
			continue
		}
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			m := metric{Attempt: r.Attempt, Epoch: int64(vals["epoch"]), Step: int64(vals["step"]), Accuracy: vals["accuracy"], Time: r.Time}
			if r.Attempt == 0 && m.Epoch == 1 {
				perEpoch = m.Step
			}
			metrics = append(metrics, m)
		}
		if v, ok := strings.CutPrefix(r.Line, "dlc:checkpoint step="); ok {
			step, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			lastSaved[r.Attempt] = step
		}
		if r.Attempt == 1 && resumedLine.MatchString(r.Line) {
			resumed = append(resumed, r.Line)
		}
	}

	// Attempt 1 resumed from the newest complete checkpoint: at least as new as the
	// last one attempt 0 reported complete, older than the partial one, and loadable
	// (the trainer checked its manifest and checksums).
	uriOf, step, err := checkpoint.ParseRef(a1.ResumedFrom)
	if err != nil || uriOf != uri {
		t.Fatalf("attempt 1 resumed from %q (%v), want a checkpoint under %s", a1.ResumedFrom, err, uri)
	}
	if a1.ResumedFrom == partial || step >= 1_000_000 {
		t.Errorf("attempt 1 resumed from the partial checkpoint %s", a1.ResumedFrom)
	}
	if step < lastSaved[0] || step == 0 {
		t.Errorf("attempt 1 resumed from step %d; attempt 0 had reported step %d complete", step, lastSaved[0])
	}
	if len(resumed) != 1 {
		t.Fatalf("attempt 1's rank 0 logged %q, want one \"resumed from\" line", resumed)
	}
	sub := resumedLine.FindStringSubmatch(resumed[0])
	if sub[1] != a1.ResumedFrom || sub[3] != strconv.FormatInt(step, 10) {
		t.Errorf("trainer says %q, workflow says it resumed from %s", resumed[0], a1.ResumedFrom)
	}
	resumedEpoch, _ := strconv.ParseInt(sub[2], 10, 64)

	// The step count continues: attempt 1's first epoch is the one after the
	// checkpoint, its step one epoch's worth of steps further, and it runs to the end.
	var after []metric
	for _, m := range metrics {
		if m.Attempt == 1 {
			after = append(after, m)
		}
	}
	if perEpoch == 0 || len(after) == 0 {
		t.Fatalf("metric lines: %+v", metrics)
	}
	first := after[0]
	if first.Step <= 0 || first.Epoch != resumedEpoch+1 || first.Step != step+perEpoch {
		t.Errorf("attempt 1's first metric: epoch %d step %d, want epoch %d step %d (checkpoint step %d + %d per epoch)",
			first.Epoch, first.Step, resumedEpoch+1, step+perEpoch, step, perEpoch)
	}
	var epochs, wantEpochs []int64
	for i, m := range after {
		epochs = append(epochs, m.Epoch)
		wantEpochs = append(wantEpochs, resumedEpoch+1+int64(i))
	}
	if diff := cmp.Diff(wantEpochs, epochs); diff != "" || epochs[len(epochs)-1] != totalEpochs {
		t.Errorf("attempt 1's epochs (-want +got):\n%s", diff)
	}
	if last := after[len(after)-1]; last.Accuracy < 0.8 || last.Step != totalEpochs*perEpoch {
		t.Errorf("final metric: step %d accuracy %.3f, want step %d and accuracy >= 0.8", last.Step, last.Accuracy, totalEpochs*perEpoch)
	}
	if st.LastCheckpoint != checkpoint.RefFor(uri, totalEpochs*perEpoch) {
		t.Errorf("last checkpoint %q, want step %d's", st.LastCheckpoint, totalEpochs*perEpoch)
	}

	want := []string{"Pending", "Launching", "Running", "Restarting", "Launching", "Running", "Succeeded"}
	if diff := cmp.Diff(want, phaseList(st)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, phasesOf(statusEvents(t, ctx, ws, name))); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	t.Logf("SIGKILL %s → fault seen %s → released %s → attempt 1 running %s → first resumed metric %s",
		killed.Format("15:04:05.000"), a0.FaultTime.Format("15:04:05.000"), a0.ReleasedTime.Format("15:04:05.000"),
		a1.RunningTime.Format("15:04:05.000"), first.Time.Format("15:04:05.000"))
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, name), "training_job_recovered.json")
}

// Checkpoint retention: once a job has succeeded, its checkpoints are pruned to
// spec.checkpoint.keep, whether or not the training code pruned them, with the dead
// partial saves among them; a save newer than every complete checkpoint stays, and a
// failed job keeps everything.
func TestRecoveryRetentionAfterSuccess(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	seed := func(uri string) {
		for _, step := range []int64{10, 20, 30, 40} {
			if _, err := env.store.Save(ctx, uri, step, map[string][]byte{"w": []byte(strconv.FormatInt(step, 10))}, nil); err != nil {
				t.Fatal(err)
			}
		}
		putPartial(t, ctx, uri, 25) // died while saving
		putPartial(t, ctx, uri, 50) // may still be saving
	}
	tests := map[string]struct {
		command      string
		wantPhase    schemas.JobPhase
		wantComplete []int64
		wantAll      []int64
	}{
		"succeeded": {command: "true", wantPhase: schemas.JobSucceeded, wantComplete: []int64{30, 40}, wantAll: []int64{30, 40, 50}},
		"failed":    {command: "false", wantPhase: schemas.JobFailed, wantComplete: []int64{10, 20, 30, 40}, wantAll: []int64{10, 20, 25, 30, 40, 50}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			uri := fmt.Sprintf("s3://dlc/%s/%s", ws, name)
			seed(uri)
			submit(t, ctx, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [%q]
  roles: {worker: {replicas: 1}}
  checkpoint: {uri: %q, keep: 2}
`, tc.command, uri)))
			st := waitTerminal(t, ctx, ws, name).Status
			if st.Phase != tc.wantPhase {
				t.Fatalf("phase %s (%s), want %s", st.Phase, st.Message, tc.wantPhase)
			}
			if st.LastCheckpoint != checkpoint.RefFor(uri, 40) {
				t.Errorf("last checkpoint %q, want step 40's", st.LastCheckpoint)
			}
			ms, err := env.store.List(ctx, uri)
			if err != nil {
				t.Fatal(err)
			}
			var complete []int64
			for _, m := range ms {
				complete = append(complete, m.Step)
			}
			if diff := cmp.Diff(tc.wantComplete, complete); diff != "" {
				t.Errorf("complete checkpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAll, stepsStored(t, ctx, uri)); diff != "" {
				t.Errorf("steps holding objects (-want +got):\n%s", diff)
			}
		})
	}
}
