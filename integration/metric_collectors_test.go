package integration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/local"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// metricWriter is the trainer stand-in that logs metrics as the libraries do.
func metricWriter(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/metric_writer.py")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writerAccuracy is what metric_writer.py reports at epoch e (from 1) for lr.
func writerAccuracy(lr float64, e int) float64 {
	shape := []float64{0.5, 0.9, 0.7, 0.8}
	return math.Round(lr*shape[(e-1)%4]*1e6) / 1e6
}

// writerLatency is the latency_ms metric_writer.py reports at epoch e.
func writerLatency(e int) float64 { return []float64{100, 80, 120, 90}[(e-1)%4] }

// aggregateOf is agg over values (best: the largest, the objectives here maximize).
func aggregateOf(agg schemas.ObjectiveAggregate, values []float64) float64 {
	switch agg {
	case schemas.AggregateMean:
		s := 0.0
		for _, v := range values {
			s += v
		}
		return s / float64(len(values))
	case schemas.AggregateMin:
		m := values[0]
		for _, v := range values {
			m = min(m, v)
		}
		return m
	case schemas.AggregateMax, schemas.AggregateBest:
		m := values[0]
		for _, v := range values {
			m = max(m, v)
		}
		return m
	}
	return values[len(values)-1]
}

const writerEpochs = 4

// aggregateField is the objective's aggregate field (none for the default).
func aggregateField(agg schemas.ObjectiveAggregate) string {
	if agg == "" {
		return ""
	}
	return ", aggregate: " + string(agg)
}

// An experiment's objective read through each collector from a real python3 program
// writing each library's format while it runs, with a different aggregate each: the
// trials' values are the aggregates of what the program wrote, each objective report
// is counted once, the jobs' statuses carry the last values, and the metric events hold
// each file row once.
func TestExperimentObjectiveThroughEachCollector(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	writer := metricWriter(t)
	for _, tc := range []struct {
		name, format, metric, collector string
		agg                             schemas.ObjectiveAggregate
		fileRows                        int // rows with values, per trial job
	}{
		{"mc-stdout", "stdout", "accuracy", `{stdout: {regex: 'acc: (?P<accuracy>[0-9.]+)'}}`, "", 0},
		{"mc-jsonl", "jsonl", "accuracy", `{file: {path: metrics.jsonl, format: jsonl}}`, schemas.AggregateMax, writerEpochs},
		{"mc-lightning", "lightning", "val_acc", `{file: {path: lightning_logs/version_0/metrics.csv, format: csv}}`, schemas.AggregateBest, 2 * writerEpochs},
		{"mc-keras", "keras", "val_accuracy", `{file: {path: training.log, format: csv}}`, schemas.AggregateMin, writerEpochs},
		{"mc-hf", "hf", "eval_accuracy", `{file: {path: "out/checkpoint-*/trainer_state.json", format: hf-trainer-state}}`, schemas.AggregateMean, 2 * writerEpochs},
	} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			// The context starts with the subtest: a parallel subtest waits for a slot
			// after its parent has returned.
			ctx := itest.Context(t, 5*time.Minute)
			dir := t.TempDir()
			spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: lr, type: categorical, values: ["0.5", "1.0"]}
  objective: {metric: %s, direction: maximize%s}
  algorithm: {name: grid}
  maxTrials: 2
  parallelism: 1
  maxTrialRetries: 0
  trialTemplate:
    framework: custom
    workingDir: %s
    command: [/usr/bin/python3, %s, %s, "${params.lr}", "%d", "0.3"]
    roles: {worker: {replicas: 1}}
    metrics:
      collectors: [%s]
`, tc.name, ws, tc.metric, aggregateField(tc.agg), dir, writer, tc.format, writerEpochs, tc.collector)
			if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
				t.Fatal(err)
			}
			x := waitExperiment(t, ctx, env.api, ws, tc.name)
			if x.Status.Phase != schemas.ExperimentSucceeded || len(x.Status.Trials) != 2 {
				t.Fatalf("%s: %s (%s), %d trials", tc.name, x.Status.Phase, x.Status.Message, len(x.Status.Trials))
			}
			best := math.Inf(-1)
			for _, tr := range x.Status.Trials {
				lr, err := strconv.ParseFloat(fmt.Sprint(tr.Params["lr"]), 64)
				if err != nil {
					t.Fatalf("trial %d params %v", tr.ID, tr.Params)
				}
				var reported []float64
				for e := 1; e <= writerEpochs; e++ {
					reported = append(reported, writerAccuracy(lr, e))
				}
				want := aggregateOf(tc.agg, reported)
				best = max(best, want)
				if tr.Phase != schemas.TrialCompleted || tr.Value == nil || math.Abs(*tr.Value-want) > 1e-9 {
					t.Errorf("trial %d (lr %g): %s %q, value %v, want %v", tr.ID, lr, tr.Phase, tr.Message, tr.Value, want)
				}
				if len(tr.Reports) != writerEpochs || tr.Reports[writerEpochs-1].Value != reported[writerEpochs-1] {
					t.Errorf("trial %d reports %+v, want the %d values %v", tr.ID, tr.Reports, writerEpochs, reported)
				}
				job, err := env.api.GetJob(ctx, ws, tr.Job)
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := job.Status.Metrics[tc.metric]; !ok || v != reported[writerEpochs-1] {
					t.Errorf("job %s status metrics %v, want %s = %v", tr.Job, job.Status.Metrics, tc.metric, reported[writerEpochs-1])
				}
				checkFileRows(t, ctx, ws, tr.Job, tc.fileRows)
			}
			if x.Status.BestValue == nil || math.Abs(*x.Status.BestValue-best) > 1e-9 {
				t.Errorf("best value %v, want %v", x.Status.BestValue, best)
			}
		})
	}
}

// checkFileRows checks that a job's metric events hold rows 1..want of its metrics file
// once each (want 0: no file rows at all).
func checkFileRows(t *testing.T, ctx context.Context, ws, job string, want int) {
	t.Helper()
	checkFileRowsOn(t, ctx, env.events, ws, job, want)
}

func checkFileRowsOn(t *testing.T, ctx context.Context, js *jetstream.Client, ws, job string, want int) {
	t.Helper()
	evs, data := streamEvents[events.MetricData](t, ctx, js, events.JobMetricsSubject(ws, job))
	seen := map[int64]int{}
	ids := map[string]bool{}
	for i, d := range data {
		if d.Source == "" {
			continue
		}
		if !strings.HasPrefix(d.Source, "file:") || ids[evs[i].ID] {
			t.Errorf("job %s: event %s source %q", job, evs[i].ID, d.Source)
		}
		ids[evs[i].ID] = true
		seen[d.Seq]++
	}
	if len(seen) != want {
		t.Errorf("job %s: %d file rows published, want %d: %v", job, len(seen), want, seen)
	}
	for seq := int64(1); seq <= int64(want); seq++ {
		if seen[seq] != 1 {
			t.Errorf("job %s: row %d published %d times", job, seq, seen[seq])
		}
	}
}

// A weighted objective: each trial's value is the mean accuracy minus a thousandth of
// the mean latency, both read from a JSON lines file; the trials never report the
// objective's own name. The two trials run at once, each writing a file its parameter
// names (${params.lr} in the collector's path).
func TestExperimentWeightedObjectiveFromAFile(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	dir := t.TempDir()
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: weighted, workspace: %s}
spec:
  searchSpace:
    - {name: lr, type: categorical, values: ["0.5", "1.0"]}
  objective:
    metric: score
    direction: maximize
    aggregate: mean
    metrics: [{metric: accuracy, weight: 1}, {metric: latency_ms, weight: -0.001}]
  algorithm: {name: grid}
  maxTrials: 2
  parallelism: 2
  maxTrialRetries: 0
  trialTemplate:
    framework: custom
    workingDir: %s
    command: [/usr/bin/python3, %s, jsonl, "${params.lr}", "%d", "0.3"]
    env: [{name: METRICS_FILE, value: "run-${params.lr}.jsonl"}]
    roles: {worker: {replicas: 1}}
    metrics: {collectors: [{file: {path: "run-${params.lr}.jsonl", format: jsonl}}]}
`, ws, dir, metricWriter(t), writerEpochs)
	if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	x := waitExperiment(t, ctx, env.api, ws, "weighted")
	if x.Status.Phase != schemas.ExperimentSucceeded || len(x.Status.Trials) != 2 {
		t.Fatalf("%s (%s), %d trials", x.Status.Phase, x.Status.Message, len(x.Status.Trials))
	}
	for _, tr := range x.Status.Trials {
		lr, _ := strconv.ParseFloat(fmt.Sprint(tr.Params["lr"]), 64)
		var acc, lat []float64
		for e := 1; e <= writerEpochs; e++ {
			acc, lat = append(acc, writerAccuracy(lr, e)), append(lat, writerLatency(e))
		}
		want := aggregateOf(schemas.AggregateMean, acc) - 0.001*aggregateOf(schemas.AggregateMean, lat)
		if tr.Phase != schemas.TrialCompleted || tr.Value == nil || math.Abs(*tr.Value-want) > 1e-9 {
			t.Errorf("trial %d (lr %g): %s %q, value %v, want %v", tr.ID, lr, tr.Phase, tr.Message, tr.Value, want)
		}
		checkFileRows(t, ctx, ws, tr.Job, writerEpochs)
	}
	if a, b := x.Status.Trials[0], x.Status.Trials[1]; a.FinishTime == nil || b.StartTime == nil || !b.StartTime.Before(*a.FinishTime) {
		t.Errorf("the trials did not run at once: %v-%v, %v-%v", a.StartTime, a.FinishTime, b.StartTime, b.FinishTime)
	}
	if x.Status.BestTrial == nil || fmt.Sprint(x.Status.Trials[*x.Status.BestTrial].Params["lr"]) != "1" {
		t.Errorf("best trial %v of %+v, want lr 1.0's", x.Status.BestTrial, x.Status.Trials)
	}
	// An experiment whose watch returns weighted components and keeps aggregates, and a
	// job whose forwarder reads a metrics file, for the replay tests.
	recordHistory(t, ctx, workflows.ExperimentWorkflowID(ws, "weighted"), "experiment_weighted_objective.json")
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, x.Status.Trials[0].Job), "training_job_metrics_file.json")
}

// A worker SIGKILLed while the replica writes its metrics file: the replica runs on,
// a new worker's forwarder resumes after the last row the stream holds, and every row
// is published exactly once, the last one too.
func TestMetricsFileSurvivesAWorkerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, stateDir, first := workerStack(t, ctx)
	c := itest.AdminClient(t, e)
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()

	const rows = 40
	ws, name, dir := "metrics-kill", "rows", t.TempDir()
	if _, err := c.SubmitJob(ctx, []byte(itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  workingDir: %s
  command: [/usr/bin/python3, %s, jsonl, "1.0", "%d", "0.25"]
  roles: {worker: {replicas: 1}}
  metrics: {collectors: [{file: {path: metrics.jsonl, format: jsonl}}]}
`, dir, metricWriter(t), rows)))); err != nil {
		t.Fatal(err)
	}
	// Kill the worker once some rows are published, long before the last.
	testutil.Eventually(t, itest.Left(ctx), "5 rows published", func() error {
		_, data := streamEvents[events.MetricData](t, ctx, js, events.JobMetricsSubject(ws, name))
		if len(data) < 5 {
			return fmt.Errorf("%d rows", len(data))
		}
		if len(data) >= rows-10 {
			t.Fatalf("%d rows published before the kill: the writer is too fast for this test", len(data))
		}
		return nil
	}, 100*time.Millisecond)
	first.kill()
	_, before := streamEvents[events.MetricData](t, ctx, js, events.JobMetricsSubject(ws, name))
	t.Logf("worker killed after %d rows", len(before))
	startWorker(t, e, stateDir)

	job := itest.WaitJob(t, ctx, c, ws, name, "the job to succeed", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if job.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", job.Status.Phase, job.Status.Message)
	}
	checkFileRowsOn(t, ctx, js, ws, name, rows)
	_, data := streamEvents[events.MetricData](t, ctx, js, events.JobMetricsSubject(ws, name))
	for i, d := range data {
		if want := writerAccuracy(1, i+1); d.Values["accuracy"] != want || d.Seq != int64(i+1) {
			t.Errorf("row %d: seq %d, %v, want accuracy %v", i+1, d.Seq, d.Values, want)
		}
	}
}

// A metrics file the program uploads to S3 (whole, after each epoch) is read from the
// object: the objective, each row once.
func TestExperimentObjectiveFromAnS3File(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	uri := fmt.Sprintf("s3://dlc/%s/metrics/run.jsonl", ws)
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: from-s3, workspace: %s}
spec:
  searchSpace:
    - {name: lr, type: categorical, values: ["0.5", "1.0"]}
  objective: {metric: accuracy, direction: maximize, aggregate: best}
  algorithm: {name: grid}
  maxTrials: 2
  parallelism: 1
  maxTrialRetries: 0
  trialTemplate:
    framework: custom
    command: [/usr/bin/python3, %s, s3-jsonl, "${params.lr}", "%d", "0.3"]
    env: [{name: METRICS_URI, value: %q}]
    roles: {worker: {replicas: 1}}
    metrics: {collectors: [{file: {path: %q, format: jsonl}}]}
`, ws, metricWriter(t), writerEpochs, uri, uri)
	if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	x := waitExperiment(t, ctx, env.api, ws, "from-s3")
	if x.Status.Phase != schemas.ExperimentSucceeded || len(x.Status.Trials) != 2 {
		t.Fatalf("%s (%s), %d trials", x.Status.Phase, x.Status.Message, len(x.Status.Trials))
	}
	for _, tr := range x.Status.Trials {
		lr, _ := strconv.ParseFloat(fmt.Sprint(tr.Params["lr"]), 64)
		want := writerAccuracy(lr, 2) // the best epoch
		if tr.Phase != schemas.TrialCompleted || tr.Value == nil || *tr.Value != want || len(tr.Reports) != writerEpochs {
			t.Errorf("trial %d (lr %g): %s %q, value %v, want %v; reports %+v", tr.ID, lr, tr.Phase, tr.Message, tr.Value, want, tr.Reports)
		}
		checkFileRows(t, ctx, ws, tr.Job, writerEpochs)
	}
}

// A pipeline's condition reads a metric a job step's collector read from a Keras CSV
// file, and a step's ${steps.<step>.metrics.<key>} gets its value.
func TestPipelineConditionReadsACollectedMetric(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	ws := workspace(t)
	dir := t.TempDir()
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: collected, workspace: %s}
spec:
  steps:
    - name: train
      job:
        framework: custom
        workingDir: %s
        command: [/usr/bin/python3, %s, keras, "1.0", "%d", "0.1"]
        roles: {worker: {replicas: 1}}
        metrics: {collectors: [{file: {path: training.log, format: csv}}]}
    - name: good
      dependsOn: [train]
      condition: {expression: "steps.train.metrics.val_accuracy > 0.75"}
    - name: report
      dependsOn: [good]
      job:
        framework: custom
        command: [sh, -c, 'echo "val_accuracy=$0"', "${steps.train.metrics.val_accuracy}"]
        roles: {worker: {replicas: 1}}
`, ws, dir, metricWriter(t), writerEpochs)
	if _, err := env.api.RunPipeline(ctx, []byte(spec), nil); err != nil {
		t.Fatal(err)
	}
	p := waitPipeline(t, ctx, ws, "collected")
	if p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline %s: %s", p.Status.Phase, p.Status.Message)
	}
	last := writerAccuracy(1, writerEpochs) // 0.8: the last epoch's
	for _, st := range p.Status.Steps {
		switch st.Name {
		case "train":
			if v, ok := st.Metrics["val_accuracy"]; !ok || v != last {
				t.Errorf("train step metrics %v, want val_accuracy %v", st.Metrics, last)
			}
		case "good":
			if st.ConditionResult == nil || !*st.ConditionResult {
				t.Errorf("condition %v: %s", st.ConditionResult, st.Message)
			}
		case "report":
			if st.Phase != schemas.StepSucceeded {
				t.Fatalf("report step %s: %s", st.Phase, st.Message)
			}
			var lines []string
			if err := env.api.Logs(ctx, ws, st.Job, dlc.LogOptions{}, func(r events.LogRecord) error {
				lines = append(lines, r.Line)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(lines, fmt.Sprintf("val_accuracy=%g", last)) {
				t.Errorf("report step printed %q, want val_accuracy=%g", lines, last)
			}
		}
	}
}

// In the local sandbox (dlc up's default as root) a replica writes its metrics file
// into its own /tmp, which the collector reads; a collector of the working directory,
// which the sandbox mounts read-only and the worker does not read there, is left out.
func TestSandboxedReplicaLogsToItsTmp(t *testing.T) {
	if err := local.SandboxAvailable(); err != nil {
		t.Fatalf("the sandbox tests need root and bubblewrap (`task deps` installs it): %v", err)
	}
	t.Parallel()
	ctx := itest.Context(t, 5*time.Minute)
	wd := sandboxWorkDir(t)
	writer, err := os.ReadFile(metricWriter(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "metric_writer.py"), writer, 0o644); err != nil {
		t.Fatal(err)
	}
	e := itest.StartStack(t, ctx, embedded.Config{WorkDir: wd, StorageIsolation: true, Sandbox: true})
	if !e.Sandboxed() {
		t.Fatal("the stack's local backend is not sandboxed")
	}
	c := itest.AdminClient(t, e)
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()

	const ws, name = "sandbox-metrics", "boxed"
	itest.Submit(t, ctx, c, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [/usr/bin/python3, metric_writer.py, jsonl, "1.0", "%d", "0.2"]
  env: [{name: METRICS_FILE, value: /tmp/metrics.jsonl}]
  roles: {worker: {replicas: 1}}
  metrics:
    collectors:
      - {file: {path: /tmp/metrics.jsonl, format: jsonl}}
      - {file: {path: wd-metrics.csv, format: csv}}
`, writerEpochs)))
	j := itest.WaitJob(t, ctx, c, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", j.Status.Phase, j.Status.Message)
	}
	if v, ok := j.Status.Metrics["accuracy"]; !ok || v != writerAccuracy(1, writerEpochs) {
		t.Errorf("status metrics %v, want accuracy %v", j.Status.Metrics, writerAccuracy(1, writerEpochs))
	}
	checkFileRowsOn(t, ctx, js, ws, name, writerEpochs)
	_, data := streamEvents[events.MetricData](t, ctx, js, events.JobMetricsSubject(ws, name))
	for _, d := range data {
		if d.Source != "file:/tmp/metrics.jsonl" {
			t.Errorf("a metric event from %q", d.Source)
		}
	}
	// The file was the replica's own, not the host's /tmp.
	if _, err := os.Stat("/tmp/metrics.jsonl"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the host's /tmp/metrics.jsonl: %v, want none", err)
	}
}
