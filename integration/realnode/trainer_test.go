package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/freeport"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// The examples that run examples/trainer (OpenDLC's example Go training program) with
// `go run ./examples/trainer` from a checkout. In a container the training image holds
// the program built static (images.TrainerBinary); the examples' other steps run `sh`,
// which the image has too.

// runTrainer is the replacement that runs the image's trainer binary where an example
// runs `go run ./examples/trainer` from a checkout.
var runTrainer = [2]string{"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%s]", images.TrainerBinary)}

// halfCPU is the replacement that asks half a CPU per replica of the trainer where an
// example asks one: the tests of a single trainer job run in parallel with others
// (reserve), and two replicas of a whole CPU each would leave them no room. A request
// is only what the scheduler reserves; the program and its arguments are the
// example's. The experiments (4 trials of one CPU at once) keep theirs and run alone.
var halfCPU = [2]string{`resources: {cpu: "1", memory: 256Mi}`, `resources: {cpu: 500m, memory: 256Mi}`}

// inContainers returns the example file examples/<path> as a user would submit it on
// the real nodes, in workspace ws: every job (a TrainingJob's spec, a trial template, a
// pipeline step's job) gets the training image, the workspace default (metadata and S3
// locations) becomes ws, and each of replace (old, new) applies. Every replacement must
// apply: an example that changed fails here, not later.
func inContainers(t *testing.T, path, ws string, replace ...[2]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(itest.Root(), "examples", path))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range append(replace, [2]string{"workspace: default", "workspace: " + ws}) {
		if !strings.Contains(doc, r[0]) {
			t.Fatalf("examples/%s no longer contains %q", path, r[0])
		}
		doc = strings.ReplaceAll(doc, r[0], r[1])
	}
	doc = strings.ReplaceAll(doc, "/workspaces/default/", "/workspaces/"+ws+"/")
	var out []string
	for line := range strings.SplitSeq(doc, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "command:") {
			out = append(out, line[:len(line)-len(trimmed)]+"image: "+env.training.Root.Ref)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// trainerRun is what examples/trainer's rank 0 printed: its metric lines (epoch →
// "loss=L accuracy=A") and its checkpoints.
type trainerRun struct {
	metrics     map[int]string
	checkpoints []string
	lastAcc     float64
	ranks       map[int]bool // ranks that printed anything
}

func parseTrainer(lines []events.LogRecord) trainerRun {
	r := trainerRun{metrics: map[int]string{}, ranks: map[int]bool{}}
	for _, l := range lines {
		r.ranks[l.Index] = true
		if vals, ok := events.ParseMetricLine(l.Line); ok {
			if e, ok := vals["epoch"]; ok {
				r.metrics[int(e)] = fmt.Sprintf("step=%v loss=%.4f accuracy=%.4f", vals["step"], vals["loss"], vals["accuracy"])
				r.lastAcc = vals["accuracy"]
			}
		}
		if uri, ok := strings.CutPrefix(l.Line, "dlc:checkpoint "); ok {
			r.checkpoints = append(r.checkpoints, uri)
		}
	}
	return r
}

// examples/trainer/job.yaml in containers: two replicas of the trainer on the real
// nodes average their weights over TCP after every epoch (rank 0 at MASTER_ADDR, the
// first pod's DNS name), and rank 0 checkpoints to the stack's S3 from inside its pod.
// What they computed is checked against the same program run here as two local
// processes with the same arguments: the data-parallel training is deterministic, so
// every epoch's loss and accuracy must be the same, digit for digit.
func TestTrainerExampleInContainers(t *testing.T) {
	t.Parallel()
	reserve(t, "500m", "500m")
	ctx := itest.Context(t, 8*time.Minute)
	const ws, name = "rn-trainer", "logreg-ddp"
	submit(t, ctx, inContainers(t, "trainer/job.yaml", ws, runTrainer, halfCPU))
	mustSucceed(t, ctx, ws, name)
	got := parseTrainer(jobLogs(t, ctx, ws, name))
	if len(got.metrics) != 10 || !got.ranks[0] || !got.ranks[1] {
		t.Fatalf("rank 0 reported epochs %v; ranks that printed %v; want 10 epochs from a gang of 2", got.metrics, got.ranks)
	}
	// The checkpoints rank 0 wrote from inside its pod: the last one is complete in S3.
	store, err := checkpoint.NewStore(env.stack.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	uri := "s3://dlc/workspaces/" + ws + "/checkpoints/" + name
	latest, err := store.Latest(ctx, uri)
	if err != nil {
		t.Fatalf("no complete checkpoint under %s: %v (the job printed %v)", uri, err, got.checkpoints)
	}
	if len(got.checkpoints) == 0 || !strings.Contains(got.checkpoints[len(got.checkpoints)-1], fmt.Sprintf("step=%d ", latest.Step)) {
		t.Errorf("the job's last checkpoint line %v, S3's newest checkpoint at step %d", got.checkpoints, latest.Step)
	}

	// The same two ranks, as local processes of the same program.
	local := runTrainerLocally(t, ctx, 2, "--epochs", "10", "--lr", "0.2")
	for epoch := 1; epoch <= 10; epoch++ {
		if got.metrics[epoch] != local[epoch] {
			t.Errorf("epoch %d: in containers %q, locally %q", epoch, got.metrics[epoch], local[epoch])
		}
	}
}

// runTrainerLocally runs examples/trainer as world ranks on this machine (loopback
// rendezvous) and returns rank 0's metrics by epoch.
func runTrainerLocally(t *testing.T, ctx context.Context, world int, args ...string) map[int]string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trainer")
	if err := itest.Build(ctx, "./examples/trainer", bin); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.One()
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]strings.Builder, world)
	cmds := make([]*exec.Cmd, world)
	for rank := range world {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", world),
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port))
		cmd.Stdout, cmd.Stderr = &outs[rank], &outs[rank]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[rank] = cmd
	}
	for rank, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("local rank %d: %v\n%s", rank, err, outs[rank].String())
		}
	}
	var recs []events.LogRecord
	for line := range strings.SplitSeq(outs[0].String(), "\n") {
		recs = append(recs, events.LogRecord{Line: line})
	}
	return parseTrainer(recs).metrics
}

// examples/pipeline/retrain.yaml in containers: preprocess (sh), train (the trainer, 2
// replicas, checkpoints in S3), evaluate (sh, reporting train's accuracy), the
// condition (accuracy above the parameter) and promote. Every step's job runs on the
// real nodes; the outputs and metrics flow from step to step.
func TestRetrainPipelineExampleInContainers(t *testing.T) {
	t.Parallel()
	// Its steps run one after the other; only train asks for CPU.
	reserve(t, "500m", "500m")
	ctx := itest.Context(t, 10*time.Minute)
	const ws, name = "rn-pipeline", "retrain-nightly"
	run, err := env.api.RunPipeline(ctx, []byte(inContainers(t, "pipeline/retrain.yaml", ws, runTrainer, halfCPU)), map[string]string{"currentAccuracy": "0.5"})
	if err != nil {
		t.Fatal(err)
	}
	run, err = env.api.WaitPipeline(ctx, ws, run.Spec.Metadata.Name, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := run.Status
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline %s (%s: %s), steps %+v", st.Phase, st.Reason, st.Message, st.Steps)
	}
	for _, s := range []string{"preprocess", "train", "evaluate", "better", "promote"} {
		if step := st.Step(s); step == nil || step.Phase != schemas.StepSucceeded {
			t.Fatalf("step %s: %+v, want Succeeded", s, step)
		}
	}
	if r := st.Step("better").ConditionResult; r == nil || !*r {
		t.Errorf("the condition: %v, want true", r)
	}
	train := parseTrainer(jobLogs(t, ctx, ws, st.Step("train").Job))
	if len(train.metrics) != 10 || !train.ranks[1] {
		t.Fatalf("train reported epochs %v from ranks %v, want 10 from a gang of 2", train.metrics, train.ranks)
	}
	ckpt := st.Step("train").Outputs[schemas.OutputCheckpoint]
	if !strings.HasPrefix(ckpt, "s3://dlc/workspaces/"+ws+"/checkpoints/"+name) {
		t.Errorf("train's checkpoint output %q", ckpt)
	}
	// evaluate got train's checkpoint and accuracy through the pipeline; promote, the
	// checkpoint and evaluate's metric.
	acc := fmt.Sprint(st.Step("evaluate").Metrics["accuracy"])
	if fmt.Sprintf("%.4f", st.Step("evaluate").Metrics["accuracy"]) != fmt.Sprintf("%.4f", train.lastAcc) {
		t.Errorf("evaluate reported accuracy %s, train's last %.4f", acc, train.lastAcc)
	}
	wantLines := map[string]string{
		"preprocess": "preprocessing s3://datasets/clicks/latest.csv into s3://dlc/workspaces/" + ws + "/features/" + name,
		"evaluate":   "evaluating " + ckpt,
		"promote":    "promoting " + ckpt + " (accuracy " + acc + ")",
	}
	for step, want := range wantLines {
		var lines []string
		for _, r := range jobLogs(t, ctx, ws, st.Step(step).Job) {
			lines = append(lines, r.Line)
		}
		if len(lines) == 0 || lines[0] != want {
			t.Errorf("step %s printed %q, want first %q", step, lines, want)
		}
	}
}

// examples/experiment/tune.yaml in containers: 16 trials of the trainer, 4 at a time
// (one CPU each: all the real nodes have), suggested by TPE and stopped early by ASHA.
// Every trial ended (completed or pruned), and the best value is the accuracy its
// trial's job reported last.
func TestTuneExperimentExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 15*time.Minute)
	const ws, name = "rn-tune", "tune-logreg"
	if _, err := env.api.CreateExperiment(ctx, []byte(inContainers(t, "experiment/tune.yaml", ws, runTrainer))); err != nil {
		t.Fatal(err)
	}
	var e *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "the experiment ends", func() bool {
		var err error
		e, err = env.api.GetExperiment(ctx, ws, name)
		return err == nil && e.Status.Phase.Terminal()
	}, itest.PollInterval)
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 16 || st.Completed+st.Pruned != 16 || st.BestTrial == nil || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d pruned, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Pruned, st.Failed)
	}
	if st.Pruned == 0 {
		t.Errorf("ASHA stopped no trial early (16 completed)")
	}
	var best schemas.TrialStatus
	for _, tr := range st.Trials {
		if tr.ID == *st.BestTrial {
			best = tr
		}
	}
	run := parseTrainer(jobLogs(t, ctx, ws, best.Job))
	if fmt.Sprintf("%.4f", run.lastAcc) != fmt.Sprintf("%.4f", *st.BestValue) || len(run.metrics) != 10 {
		t.Errorf("best trial %d: value %v, its job reported %d epochs, the last accuracy %.4f", best.ID, *st.BestValue, len(run.metrics), run.lastAcc)
	}
	t.Logf("16 trials: %d completed, %d pruned; best trial %d accuracy %.4f %v", st.Completed, st.Pruned, best.ID, *st.BestValue, st.BestParams)
}

// examples/experiment/pbt.yaml in containers: a population of 4 trainers (one CPU each)
// for 4 generations of 2 epochs. Each trial after the first generation starts from a
// checkpoint in S3 (its own or a better member's) that rank 0 of an earlier trial wrote
// from inside its pod, and its job says so; every trial stops at its generation's end.
func TestPBTExperimentExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 15*time.Minute)
	const ws, name = "rn-pbt", "pbt-logreg"
	if _, err := env.api.CreateExperiment(ctx, []byte(inContainers(t, "experiment/pbt.yaml", ws, runTrainer))); err != nil {
		t.Fatal(err)
	}
	var e *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "the experiment ends", func() bool {
		var err error
		e, err = env.api.GetExperiment(ctx, ws, name)
		return err == nil && e.Status.Phase.Terminal()
	}, itest.PollInterval)
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 16 || st.Completed != 16 || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
	}
	exploited := 0
	for _, tr := range st.Trials {
		l := tr.PBT
		if l == nil {
			t.Fatalf("trial %d has no lineage", tr.ID)
		}
		run := parseTrainer(jobLogs(t, ctx, ws, tr.Job))
		// Each generation is 2 epochs: the trial reports epochs 2g+1 and 2g+2.
		if _, ok := run.metrics[2*l.Generation+2]; !ok || len(run.metrics) != 2 || int64(2*l.Generation+2) != l.StopAtStep {
			t.Errorf("trial %d (generation %d, stop at %d) reported epochs %v", tr.ID, l.Generation, l.StopAtStep, run.metrics)
		}
		if l.Generation == 0 {
			continue
		}
		if l.Donor != nil {
			exploited++
		}
		resumed := false
		for _, r := range jobLogs(t, ctx, ws, tr.Job) {
			resumed = resumed || strings.HasPrefix(r.Line, "resumed from "+l.ResumeFrom+":")
		}
		if l.ResumeFrom == "" || !resumed {
			t.Errorf("trial %d (generation %d) resumed from %q; its job did not say so", tr.ID, l.Generation, l.ResumeFrom)
		}
	}
	if exploited == 0 {
		t.Error("no trial copied a better member's checkpoint")
	}
	t.Logf("16 trials, %d exploited a better member; best accuracy %v %v", exploited, *st.BestValue, st.BestParams)
}

// examples/schedule/nightly.yaml in containers, its runs triggered by hand (its cron
// fires at 02:00 in Shanghai): with new data under the data prefix, a run trains the
// trainer job on the real nodes, checkpointing to S3; after more data arrives, the next
// run resumes from the checkpoint the previous run's pod wrote (runOptions
// resumeFromPreviousCheckpoint), and the trainer in its pod says so.
func TestNightlyScheduleExampleInContainers(t *testing.T) {
	t.Parallel()
	// Its runs are triggered one after the other.
	reserve(t, "500m", "500m")
	ctx := itest.Context(t, 8*time.Minute)
	const ws, name = "rn-nightly", "nightly"
	if _, err := env.api.CreateSchedule(ctx, []byte(inContainers(t, "schedule/nightly.yaml", ws, runTrainer, halfCPU))); err != nil {
		t.Fatal(err)
	}
	s3c, bucket, prefix := itest.RawS3(t, env.stack, "s3://dlc/workspaces/"+ws+"/datasets/logreg/")
	newData := func(key string) {
		t.Helper()
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	run := func() schemas.ScheduleRun {
		t.Helper()
		tr, err := env.api.TriggerSchedule(ctx, ws, name, "")
		if err != nil {
			t.Fatal(err)
		}
		if tr.Run.Job == "" {
			t.Fatalf("the trigger started no job: %+v", tr.Run)
		}
		mustSucceed(t, ctx, ws, tr.Run.Job)
		// The schedule learns of its job's end a moment after the job does; a trigger
		// before then is skipped by the overlap policy (an earlier run still running).
		testutil.Eventually(t, time.Minute, "the schedule records the end of run "+tr.Run.Job, func() error {
			v, err := env.api.GetSchedule(ctx, ws, name, 0)
			if err != nil {
				return err
			}
			for _, h := range v.Status.History {
				if h.Job == tr.Run.Job && h.FinishTime != nil {
					return nil
				}
			}
			return fmt.Errorf("running %d, history %d", len(v.Status.Running), len(v.Status.History))
		}, 200*time.Millisecond)
		return tr.Run
	}
	newData("day-1.csv")
	first := run()
	got := parseTrainer(jobLogs(t, ctx, ws, first.Job))
	if len(got.metrics) != 10 || !got.ranks[1] || len(got.checkpoints) == 0 {
		t.Fatalf("the first run's job %s reported epochs %v from ranks %v, checkpoints %v; want 10 epochs of 2 ranks with checkpoints", first.Job, got.metrics, got.ranks, got.checkpoints)
	}
	newData("day-2.csv")
	second := run()
	var resumed []string
	for _, r := range jobLogs(t, ctx, ws, second.Job) {
		if strings.HasPrefix(r.Line, "resumed from ") {
			resumed = append(resumed, r.Line)
		}
	}
	last := got.checkpoints[len(got.checkpoints)-1] // "step=S uri=REF"
	ref := last[strings.Index(last, "uri=")+len("uri="):]
	if len(resumed) != 1 || !strings.HasPrefix(resumed[0], "resumed from "+ref+":") {
		t.Errorf("the second run's job %s says %q; want it resumed from the first run's last checkpoint %s", second.Job, resumed, ref)
	}
}
