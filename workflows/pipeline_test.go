package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// retrainDoc is preprocess → train → evaluate → better (a condition) → promote, with a
// side step that depends on nothing.
const retrainDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: retrain, workspace: team, labels: {app: ctr}}
spec:
  params:
    - {name: dataKey}
    - {name: currentAccuracy, default: "0.8"}
  steps:
    - name: preprocess
      job:
        framework: custom
        command: [prep, "${params.dataKey}"]
        roles: {worker: {replicas: 1}}
      outputs: {dataset: "s3://dlc/data/${pipeline.name}"}
    - name: train
      dependsOn: [preprocess]
      job:
        framework: custom
        command: [train, --data, "${steps.preprocess.outputs.dataset}"]
        roles: {worker: {replicas: 1}}
        checkpoint: {uri: "s3://dlc/ckpt/${pipeline.name}"}
    - name: evaluate
      dependsOn: [train]
      job:
        framework: custom
        command: [eval]
        env: [{name: MODEL, value: "${steps.train.outputs.checkpoint}"}, {name: TRAIN_ACC, value: "${steps.train.metrics.accuracy}"}]
        roles: {worker: {replicas: 1}}
    - name: better
      dependsOn: [evaluate]
      condition: {expression: "steps.evaluate.metrics.accuracy > params.currentAccuracy"}
    - name: promote
      dependsOn: [better]
      job:
        framework: custom
        command: [promote, "${steps.train.outputs.checkpoint}"]
        roles: {worker: {replicas: 1}}
`

// parallelDoc is train → (eval-a, eval-b) → report.
const parallelDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fan, workspace: team}
spec:
  steps:
    - {name: report, dependsOn: [eval-a, eval-b], job: {framework: custom, command: [r], roles: {worker: {replicas: 1}}}}
    - {name: eval-a, dependsOn: [train], job: {framework: custom, command: [a], roles: {worker: {replicas: 1}}}}
    - {name: train, job: {framework: custom, command: [t], roles: {worker: {replicas: 1}}}}
    - {name: eval-b, dependsOn: [train], job: {framework: custom, command: [b], roles: {worker: {replicas: 1}}}}
`

// fakeJob is how a mocked step job behaves.
type fakeJob struct {
	// took is how long the job runs on the workflow clock; zero runs until stopped.
	took       time.Duration
	phase      schemas.JobPhase
	message    string
	checkpoint string
	metrics    map[string]float64
}

// pipelineHarness runs the Pipeline workflow with fake step jobs and mocked activities
// (BuildStepJob, a local activity without I/O, runs for real).
type pipelineHarness struct {
	env  *testsuite.TestWorkflowEnvironment
	jobs map[string]fakeJob // by step name

	mu      sync.Mutex
	started []schemas.TrainingJob // in start order
	// startedAt is when each of started started, on the workflow clock.
	startedAt []time.Time
	stopped   []string // workflow ids
	// running and maxRunning count the fake jobs running at once (pipeline_fanout_test.go).
	running, maxRunning int
	// onPublish receives the published events, when set.
	onPublish func(activities.PublishEventsInput) error
}

func newPipelineHarness(t *testing.T, jobs map[string]fakeJob) *pipelineHarness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	h := &pipelineHarness{env: s.NewTestWorkflowEnvironment(), jobs: jobs}
	// The step jobs are a fake TrainingJob workflow rather than an OnWorkflow mock: the
	// test environment reports a mocked child started only once it has finished, and
	// the pipeline waits for a job to have started before it stops it.
	h.env.RegisterWorkflowWithOptions(workflows.PipelineWorkflow, workflow.RegisterOptions{Name: workflows.PipelineWorkflowName})
	h.env.RegisterWorkflowWithOptions(h.fakeTrainingJob, workflow.RegisterOptions{Name: workflows.TrainingJobWorkflowName})
	workers.RegisterPipelineActivities(h.env, &activities.PipelineActivities{})
	workers.RegisterActivities(h.env, &activities.JobActivities{})
	// The run's phase events go to onPublish (pipeline_retries_test.go), when set.
	onActivityErr(h.env, jobActs.PublishEvents, func(_ context.Context, in activities.PublishEventsInput) error {
		if h.onPublish != nil {
			return h.onPublish(in)
		}
		return nil
	})
	onActivity(h.env, pipelineActs.JobMetrics, func(_ context.Context, in activities.JobMetricsInput) (activities.JobMetricsResult, error) {
		step := strings.TrimPrefix(in.Job, "retrain-")
		step = strings.TrimPrefix(step, "fan-")
		return activities.JobMetricsResult{Values: h.jobs[step].metrics}, nil
	})
	onActivityErr(h.env, pipelineActs.StopJob, func(_ context.Context, in activities.StopJobInput) error {
		h.mu.Lock()
		h.stopped = append(h.stopped, in.WorkflowID)
		h.mu.Unlock()
		if in.UpdateName != workflows.UpdateStop {
			return errors.New("wrong update name " + in.UpdateName)
		}
		return h.env.SignalWorkflowByID(in.WorkflowID, "test-stop", nil)
	})
	return h
}

// fakeTrainingJob stands in for a step's job: it takes its time on the workflow clock,
// then ends as told; asked to stop (the "test-stop" signal), it ends Stopped.
func (h *pipelineHarness) fakeTrainingJob(ctx workflow.Context, in workflows.TrainingJobInput) (workflows.TrainingJobResult, error) {
	h.mu.Lock()
	h.started = append(h.started, in.Job)
	h.startedAt = append(h.startedAt, workflow.Now(ctx))
	h.running++
	h.maxRunning = max(h.maxRunning, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	step := in.Job.Metadata.Labels[schemas.LabelPipelineStep]
	fj, ok := h.jobs[in.Job.Metadata.Name] // a try of a step with retries, by its job's name
	if !ok {
		fj, ok = h.jobs[step]
	}
	if !ok {
		fj = fakeJob{took: time.Minute, phase: schemas.JobSucceeded}
	}
	start := workflow.Now(ctx)
	stopped := false
	sel := workflow.NewSelector(ctx)
	if fj.took > 0 {
		sel.AddFuture(workflow.NewTimer(ctx, fj.took), func(workflow.Future) {})
	}
	sel.AddReceive(workflow.GetSignalChannel(ctx, "test-stop"), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		stopped = true
	})
	sel.Select(ctx)
	end := workflow.Now(ctx)
	st := schemas.JobStatus{Phase: fj.phase, Message: fj.message, LastCheckpoint: fj.checkpoint, StartTime: &start, FinishTime: &end}
	if stopped {
		st.Phase, st.Message = schemas.JobStopped, "stopped by request"
	}
	return workflows.TrainingJobResult{Status: st}, nil
}

func (h *pipelineHarness) run(t *testing.T, doc string, params map[string]string) schemas.PipelineStatus {
	t.Helper()
	obj, err := schemas.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*schemas.Pipeline)
	if errs := p.Validate(); errs != nil {
		t.Fatalf("invalid pipeline: %v", errs)
	}
	values, errs := p.Spec.ResolveParams(params)
	if errs != nil {
		t.Fatalf("params: %v", errs)
	}
	h.env.ExecuteWorkflow(workflows.PipelineWorkflowName, workflows.PipelineInput{Pipeline: *p, Params: values})
	return workflowResult[workflows.PipelineResult](t, h.env, "pipeline").Status
}

func (h *pipelineHarness) startedJob(name string) *schemas.TrainingJob {
	for i := range h.started {
		if h.started[i].Metadata.Name == name {
			return &h.started[i]
		}
	}
	return nil
}

// startedNames is the names of the jobs started, in start order. Jobs started at the
// same time on the workflow clock are in name order: the test environment starts the
// children a workflow task started at once in goroutines of its own, so the order in
// which their fakes run is not the workflow's.
func (h *pipelineHarness) startedNames() []string {
	idx := make([]int, len(h.started))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := h.startedAt[a].Compare(h.startedAt[b]); c != 0 {
			return c
		}
		return strings.Compare(h.started[a].Metadata.Name, h.started[b].Metadata.Name)
	})
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, h.started[i].Metadata.Name)
	}
	return out
}

// stepPhases is "name:phase" for every step, in spec order.
func stepPhases(st schemas.PipelineStatus) []string {
	var out []string
	for _, s := range st.Steps {
		out = append(out, s.Name+":"+string(s.Phase))
	}
	return out
}

func envValue(job *schemas.TrainingJob, name string) string {
	for _, e := range job.Spec.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestPipelineRunsStepsInOrderAndPassesOutputs(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"preprocess": {took: time.Minute, phase: schemas.JobSucceeded},
		"train": {took: 10 * time.Minute, phase: schemas.JobSucceeded, checkpoint: "s3://dlc/ckpt/retrain/000000000100",
			metrics: map[string]float64{"accuracy": 0.87, "loss": 0.3}},
		"evaluate": {took: time.Minute, phase: schemas.JobSucceeded, metrics: map[string]float64{"accuracy": 0.91}},
		"promote":  {took: time.Minute, phase: schemas.JobSucceeded},
	})
	st := h.run(t, retrainDoc, map[string]string{"dataKey": "clicks/2026-12-01.csv"})

	if st.Phase != schemas.PipelineSucceeded {
		t.Errorf("phase = %s (%s), want Succeeded", st.Phase, st.Message)
	}
	want := []string{"preprocess:Succeeded", "train:Succeeded", "evaluate:Succeeded", "better:Succeeded", "promote:Succeeded"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"retrain-preprocess", "retrain-train", "retrain-evaluate", "retrain-promote"}, h.startedNames()); diff != "" {
		t.Errorf("jobs started (-want +got):\n%s", diff)
	}
	// Each step starts once the one before it has finished.
	for _, pair := range [][2]string{{"preprocess", "train"}, {"train", "evaluate"}, {"evaluate", "better"}, {"better", "promote"}} {
		before, after := st.Step(pair[0]), st.Step(pair[1])
		if after.StartTime.Before(*before.FinishTime) {
			t.Errorf("%s started at %s, before %s finished at %s", pair[1], after.StartTime, pair[0], before.FinishTime)
		}
	}
	// Parameters, outputs and metrics reach later steps.
	if got := h.startedJob("retrain-preprocess").Spec.Command; !cmp.Equal(got, []string{"prep", "clicks/2026-12-01.csv"}) {
		t.Errorf("preprocess command = %q", got)
	}
	if got := h.startedJob("retrain-train").Spec.Command; !cmp.Equal(got, []string{"train", "--data", "s3://dlc/data/retrain"}) {
		t.Errorf("train command = %q", got)
	}
	if got := envValue(h.startedJob("retrain-preprocess"), "DLC_OUTPUT_DATASET"); got != "s3://dlc/data/retrain" {
		t.Errorf("preprocess DLC_OUTPUT_DATASET = %q", got)
	}
	if got := h.startedJob("retrain-train").Spec.Checkpoint.URI; got != "s3://dlc/ckpt/retrain" {
		t.Errorf("train checkpoint uri = %q", got)
	}
	ev := h.startedJob("retrain-evaluate")
	if got := envValue(ev, "MODEL"); got != "s3://dlc/ckpt/retrain/000000000100" {
		t.Errorf("evaluate MODEL = %q, want train's last checkpoint", got)
	}
	if got := envValue(ev, "TRAIN_ACC"); got != "0.87" {
		t.Errorf("evaluate TRAIN_ACC = %q, want train's last accuracy", got)
	}
	better := st.Step("better")
	if better.ConditionResult == nil || !*better.ConditionResult {
		t.Errorf("condition result = %v, want true", better.ConditionResult)
	}
	if want := "steps.evaluate.metrics.accuracy (0.91) > params.currentAccuracy (0.8) is true"; better.Message != want {
		t.Errorf("condition message = %q, want %q", better.Message, want)
	}
	train := st.Step("train")
	wantOut := map[string]string{"job": "retrain-train", "checkpointURI": "s3://dlc/ckpt/retrain", "checkpoint": "s3://dlc/ckpt/retrain/000000000100"}
	if diff := cmp.Diff(wantOut, train.Outputs); diff != "" {
		t.Errorf("train outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"accuracy": 0.87, "loss": 0.3}, map[string]float64(train.Metrics)); diff != "" {
		t.Errorf("train metrics (-want +got):\n%s", diff)
	}
	// The jobs carry the pipeline's labels and their run and step.
	wantLabels := map[string]string{"app": "ctr", schemas.LabelPipeline: "retrain", schemas.LabelPipelineStep: "train"}
	if diff := cmp.Diff(wantLabels, h.startedJob("retrain-train").Metadata.Labels); diff != "" {
		t.Errorf("train labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"dataKey": "clicks/2026-12-01.csv", "currentAccuracy": "0.8"}, st.Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}

func TestPipelineConditionFalseSkipsDependents(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"preprocess": {took: time.Minute, phase: schemas.JobSucceeded},
		"train":      {took: time.Minute, phase: schemas.JobSucceeded, checkpoint: "s3://dlc/ckpt/retrain/000000000100", metrics: map[string]float64{"accuracy": 0.7}},
		"evaluate":   {took: time.Minute, phase: schemas.JobSucceeded, metrics: map[string]float64{"accuracy": 0.75}},
	})
	st := h.run(t, retrainDoc, map[string]string{"dataKey": "k", "currentAccuracy": "0.9"})
	if st.Phase != schemas.PipelineSucceeded {
		t.Errorf("phase = %s (%s), want Succeeded", st.Phase, st.Message)
	}
	want := []string{"preprocess:Succeeded", "train:Succeeded", "evaluate:Succeeded", "better:Succeeded", "promote:Skipped"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if better := st.Step("better"); better.ConditionResult == nil || *better.ConditionResult {
		t.Errorf("condition result = %v, want false", better.ConditionResult)
	}
	promote := st.Step("promote")
	if promote.Reason != "ConditionFalse" || promote.Message != "condition better is false" || promote.StartTime != nil {
		t.Errorf("promote = %+v, want skipped because the condition is false, never started", promote)
	}
	if slices.Contains(h.startedNames(), "retrain-promote") {
		t.Error("the promote job was started")
	}
	if st.Message != "4 steps succeeded, 1 skipped" {
		t.Errorf("message = %q", st.Message)
	}
}

func TestPipelineRunsIndependentStepsInParallel(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"train":  {took: time.Minute, phase: schemas.JobSucceeded},
		"eval-a": {took: 10 * time.Minute, phase: schemas.JobSucceeded},
		"eval-b": {took: 30 * time.Minute, phase: schemas.JobSucceeded},
		"report": {took: time.Minute, phase: schemas.JobSucceeded},
	})
	st := h.run(t, parallelDoc, nil)
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase = %s (%s)", st.Phase, st.Message)
	}
	a, b, train, report := st.Step("eval-a"), st.Step("eval-b"), st.Step("train"), st.Step("report")
	if !a.StartTime.Equal(*b.StartTime) || !a.StartTime.Equal(*train.FinishTime) {
		t.Errorf("eval-a started %s and eval-b %s; want both when train finished (%s)", a.StartTime, b.StartTime, train.FinishTime)
	}
	if !report.StartTime.Equal(*b.FinishTime) {
		t.Errorf("report started %s, want when the last evaluation finished (%s)", report.StartTime, b.FinishTime)
	}
	if got := st.FinishTime.Sub(*st.StartTime); got != 32*time.Minute {
		t.Errorf("the pipeline took %s of workflow time, want 32m (1m + max(10m, 30m) + 1m)", got)
	}
	if diff := cmp.Diff("fan-train", h.startedNames()[0]); diff != "" {
		t.Errorf("first job (-want +got):\n%s", diff)
	}
}

func TestPipelineStepFailureFailsThePipeline(t *testing.T) {
	doc := strings.Replace(retrainDoc, "  steps:\n", `  steps:
    - name: side
      job: {framework: custom, command: [side], roles: {worker: {replicas: 1}}}
`, 1)
	h := newPipelineHarness(t, map[string]fakeJob{
		"side":       {phase: schemas.JobSucceeded},
		"preprocess": {took: time.Minute, phase: schemas.JobSucceeded},
		"train":      {took: time.Minute, phase: schemas.JobFailed, message: "replica retrain-train-worker-0-a0 failed with exit code 3"},
	})
	st := h.run(t, doc, map[string]string{"dataKey": "k"})
	if st.Phase != schemas.PipelineFailed {
		t.Errorf("phase = %s, want Failed", st.Phase)
	}
	if want := "step train failed: job retrain-train failed: replica retrain-train-worker-0-a0 failed with exit code 3"; st.Message != want {
		t.Errorf("message = %q, want %q", st.Message, want)
	}
	want := []string{"side:Cancelled", "preprocess:Succeeded", "train:Failed", "evaluate:Skipped", "better:Skipped", "promote:Skipped"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{workflows.JobWorkflowID("team", "retrain-side")}, h.stopped); diff != "" {
		t.Errorf("jobs stopped (-want +got):\n%s", diff)
	}
	if ev := st.Step("evaluate"); ev.Reason != "PipelineFailed" || ev.Message != "step train failed" {
		t.Errorf("evaluate = %s: %s", ev.Reason, ev.Message)
	}
}

func TestPipelineStopUpdate(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"preprocess": {took: time.Minute, phase: schemas.JobSucceeded},
		"train":      {phase: schemas.JobSucceeded},
	})
	var (
		stopResult workflows.PipelineStopResult
		stopErr    error
		view       workflows.PipelineView
	)
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		if err == nil {
			err = v.Get(&view)
		}
		if err != nil {
			t.Errorf("query: %v", err)
		}
		h.env.UpdateWorkflow(workflows.UpdateStop, "stop-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { stopErr = err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					stopErr = err
					return
				}
				stopResult = v.(workflows.PipelineStopResult)
			},
		}, workflows.StopRequest{Reason: "bad data"})
	}, time.Hour)
	st := h.run(t, retrainDoc, map[string]string{"dataKey": "k"})

	if stopErr != nil || stopResult.Phase != schemas.PipelineStopped {
		t.Errorf("stop update = %+v, %v; want Stopped", stopResult, stopErr)
	}
	if st.Phase != schemas.PipelineStopped || st.Message != "bad data" {
		t.Errorf("pipeline = %s (%s), want Stopped (bad data)", st.Phase, st.Message)
	}
	want := []string{"preprocess:Succeeded", "train:Cancelled", "evaluate:Skipped", "better:Skipped", "promote:Skipped"}
	if diff := cmp.Diff(want, stepPhases(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// The status query, an hour in, saw train running with its job named.
	if view.Status.Phase != schemas.PipelineRunning || view.Status.Step("train").Phase != schemas.StepRunning ||
		view.Status.Step("train").Job != "retrain-train" || view.Pipeline.Metadata.Name != "retrain" {
		t.Errorf("status an hour in = %+v", view.Status)
	}
}

func TestPipelineConditionWithoutMetricFails(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"train":    {took: time.Minute, phase: schemas.JobSucceeded, checkpoint: "s3://dlc/ckpt/retrain/1", metrics: map[string]float64{"accuracy": 0.8}},
		"evaluate": {took: time.Minute, phase: schemas.JobSucceeded, metrics: map[string]float64{"loss": 0.2}},
	})
	st := h.run(t, retrainDoc, map[string]string{"dataKey": "k"})
	if st.Phase != schemas.PipelineFailed {
		t.Errorf("phase = %s, want Failed", st.Phase)
	}
	better := st.Step("better")
	if better.Phase != schemas.StepFailed || better.Reason != "ConditionNotEvaluated" ||
		better.Message != `steps.evaluate.metrics.accuracy: step evaluate's job did not report "accuracy"` {
		t.Errorf("better = %s %s: %s", better.Phase, better.Reason, better.Message)
	}
	if p := st.Step("promote").Phase; p != schemas.StepSkipped {
		t.Errorf("promote = %s, want Skipped", p)
	}
}

func TestPipelineStepWithoutTheCheckpointItNeedsFails(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"train": {took: time.Minute, phase: schemas.JobSucceeded}, // no checkpoint saved
	})
	st := h.run(t, retrainDoc, map[string]string{"dataKey": "k"})
	ev := st.Step("evaluate")
	if ev.Phase != schemas.StepFailed || ev.Reason != "InvalidStep" ||
		!strings.Contains(ev.Message, "${steps.train.outputs.checkpoint}: step train's job saved no complete checkpoint") {
		t.Errorf("evaluate = %s %s: %s", ev.Phase, ev.Reason, ev.Message)
	}
	if st.Phase != schemas.PipelineFailed || slices.Contains(h.startedNames(), "retrain-evaluate") {
		t.Errorf("phase = %s, jobs started %v: want Failed without starting evaluate", st.Phase, h.startedNames())
	}
}
