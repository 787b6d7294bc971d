package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// jobMetricEvents reads a job's metric events back through the API's event stream.
func jobMetricEvents(t *testing.T, ws, name string) []events.MetricData {
	t.Helper()
	var out []events.MetricData
	err := env.api.Events(testContext(t), ws, dlc.EventOptions{Type: events.TypeJobMetric, Job: name}, func(ev events.Event) error {
		var d events.MetricData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("metric event %s: %w (%s)", ev.ID, err, ev.Data)
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		t.Fatalf("metric events: %v", err)
	}
	return out
}

// A replica that reports NaN and infinite metrics (a diverging trainer) neither stops
// its log forwarding nor trips hang detection: the NaN lines become metric events with
// the values as "NaN"/"Infinity" strings, the lines after them are forwarded, and the
// job, with a hang timeout shorter than its run after the NaN, succeeds without a
// restart.
func TestNaNMetricsDoNotStopForwarding(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	script := `echo start
echo 'dlc:metric step=1 loss=nan'
echo 'dlc:metric step=2 loss=inf grad=-inf'
echo 'dlc:metric step=3 loss="nan" note=abc'
echo '{"dlc_metric": {"step": 4, "loss": "NaN"}}'
i=5
while [ $i -le 14 ]; do echo "dlc:metric step=$i loss=0.$i"; echo "line $i"; sleep 1; i=$((i+1)); done
echo finished`
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: diverge, workspace: %s}
spec:
  framework: custom
  command: [sh, -c, %q]
  roles: {worker: {replicas: 1}}
  faultTolerance: {maxRestarts: 1, hangTimeout: 5s}
`, ws, script)
	submit(t, ctx, spec)
	job := waitTerminal(t, ctx, ws, "diverge")
	if job.Status.Phase != schemas.JobSucceeded || job.Status.Restarts != 0 {
		t.Fatalf("job %s after %d restarts: %s (attempts %+v)", job.Status.Phase, job.Status.Restarts, job.Status.Message, job.Status.Attempts)
	}
	for _, a := range job.Status.Attempts {
		if a.Class == schemas.FailureHang {
			t.Errorf("attempt %d was taken for a hang: %+v", a.Attempt, a)
		}
	}

	// The fault happened: the NaN and infinite values reached the metric stream.
	ms := jobMetricEvents(t, ws, "diverge")
	bySteps := map[float64]events.Metrics{}
	for _, m := range ms {
		bySteps[m.Values["step"]] = m.Values
	}
	if v := bySteps[1]["loss"]; !math.IsNaN(v) {
		t.Errorf("step 1 loss = %v, want NaN (events %+v)", v, ms)
	}
	if v, g := bySteps[2]["loss"], bySteps[2]["grad"]; !math.IsInf(v, 1) || !math.IsInf(g, -1) {
		t.Errorf("step 2 loss, grad = %v, %v; want +Inf, -Inf", v, g)
	}
	if v, ok := bySteps[3]["note"]; ok || !math.IsNaN(bySteps[3]["loss"]) {
		t.Errorf("step 3 = %v (note %v): want a NaN loss and no note", bySteps[3], v)
	}
	if v := bySteps[4]["loss"]; !math.IsNaN(v) {
		t.Errorf("JSON step 4 loss = %v, want NaN", v)
	}
	// ...and the metrics and lines after them were forwarded.
	for step := 5; step <= 14; step++ {
		want, _ := strconv.ParseFloat(fmt.Sprintf("0.%d", step), 64) // the script's loss=0.$i
		if v, ok := bySteps[float64(step)]["loss"]; !ok || v != want {
			t.Errorf("step %d loss = %v (%v), want %v", step, v, ok, want)
		}
	}
	if len(ms) != 14 {
		t.Errorf("%d metric events, want 14", len(ms))
	}
	var lines []string
	for _, r := range jobLogs(t, ctx, ws, "diverge") {
		lines = append(lines, r.Line)
	}
	for _, want := range []string{"dlc:metric step=1 loss=nan", `dlc:metric step=3 loss="nan" note=abc`, "line 5", "line 14", "finished"} {
		if !slices.Contains(lines, want) {
			t.Errorf("line %q was not forwarded; got %d lines, last %q", want, len(lines), lines[len(lines)-1])
		}
	}
	// The job's status carries the last values, step 14's loss 0.14 and the last grad
	// -Inf, through the API (JSON "-Infinity").
	if v, g := job.Status.Metrics["loss"], job.Status.Metrics["grad"]; v != 0.14 || !math.IsInf(g, -1) {
		t.Errorf("status metrics %v: want loss 0.14 and grad -Inf", job.Status.Metrics)
	}
}

// In an experiment, the trial whose objective is NaN fails (its job stopped, no retry)
// and the others are ranked: the best is the best finite one.
func TestExperimentNaNTrialFails(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: diverge, workspace: %s}
spec:
  searchSpace:
    - {name: acc, type: categorical, values: ["0.5", "nan", "0.7"]}
  objective: {metric: accuracy, direction: maximize, stepMetric: epoch}
  algorithm: {name: grid}
  maxTrials: 3
  parallelism: 3
  maxFailedTrials: 1
  maxTrialRetries: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, "echo dlc:metric epoch=1 accuracy=0.1; sleep 1; echo dlc:metric epoch=2 accuracy=${params.acc}; sleep 20; echo dlc:metric epoch=3 accuracy=${params.acc}"]
    roles: {worker: {replicas: 1}}
`, ws)
	if _, err := env.api.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	exp := waitExperiment(t, ctx, env.api, ws, "diverge")
	st := exp.Status
	if st.Phase != schemas.ExperimentSucceeded || st.Completed != 2 || st.Failed != 1 {
		t.Fatalf("experiment %s/%s, %d completed, %d failed: %s", st.Phase, st.Reason, st.Completed, st.Failed, st.Message)
	}
	var nanTrial *schemas.TrialStatus
	for i := range st.Trials {
		if st.Trials[i].Params["acc"] == "nan" {
			nanTrial = &st.Trials[i]
		}
	}
	if nanTrial == nil {
		t.Fatalf("no trial with acc=nan: %+v", st.Trials)
	}
	if nanTrial.Phase != schemas.TrialFailed || nanTrial.Attempts != 1 ||
		!strings.Contains(nanTrial.Message, "failed objective: accuracy = NaN at step 2") {
		t.Errorf("NaN trial: %s after %d attempts: %q", nanTrial.Phase, nanTrial.Attempts, nanTrial.Message)
	}
	// Its job was stopped, not left to run its 20 s of sleep to the end.
	job, err := env.api.GetJob(ctx, ws, nanTrial.Job)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Phase != schemas.JobStopped {
		t.Errorf("the NaN trial's job ended %s, want Stopped", job.Status.Phase)
	}
	if st.BestValue == nil || *st.BestValue != 0.7 || st.BestParams["acc"] != 0.7 {
		t.Errorf("best %v with %v, want 0.7", st.BestValue, st.BestParams)
	}
}
