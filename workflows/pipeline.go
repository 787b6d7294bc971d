package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// PipelineInput starts a Pipeline workflow.
type PipelineInput struct {
	// Pipeline is the validated, defaulted document; its name is the run's.
	Pipeline schemas.Pipeline `json:"pipeline"`
	// Params are every parameter's value, defaults included
	// (schemas.PipelineSpec.ResolveParams).
	Params map[string]string `json:"params,omitempty"`
	// Reused is set on a retry of a run (pipeline_retry.go): the steps that succeeded
	// in the run it retries, which this run does not run again.
	Reused *PipelineReuse `json:"reused,omitempty"`
}

// PipelineResult is the run's final status.
type PipelineResult struct {
	Status schemas.PipelineStatus `json:"status"`
}

// PipelineView is what the status query returns: the pipeline as submitted and the live
// status of the run and of every step.
type PipelineView struct {
	UID      string                 `json:"uid"`
	Pipeline schemas.Pipeline       `json:"pipeline"`
	Status   schemas.PipelineStatus `json:"status"`
}

// Timeouts of the Pipeline workflow's activities.
const (
	// stopJobTimeout bounds stopping one step's job (the job's stop update returns once
	// its replicas are gone).
	stopJobTimeout = 10 * time.Minute
)

// PipelineWorkflow runs a pipeline: its steps in dependency order, independent steps in
// parallel, each job step as a child TrainingJob workflow (id JobWorkflowID(workspace,
// "<run>-<step>")), each condition evaluated on the metrics and parameters it names. A
// step runs once every step it depends on has succeeded (and every condition among them
// held); otherwise it is Skipped. When a step fails the pipeline fails: running jobs are
// stopped (Cancelled) and the steps not started are Skipped. The stop update does the
// same and ends the run Stopped.
func PipelineWorkflow(ctx workflow.Context, in PipelineInput) (PipelineResult, error) {
	w := &pipelineWorkflow{in: in, logger: workflow.GetLogger(ctx)}
	if err := w.setup(ctx); err != nil {
		return PipelineResult{}, err
	}
	return w.run(ctx)
}

// pipelineWorkflow is a pipeline run's state.
type pipelineWorkflow struct {
	in     PipelineInput
	logger log.Logger
	uid    string
	status schemas.PipelineStatus
	// steps are spec.steps then spec.onExit (schemas.PipelineSpec.AllSteps): step i's
	// spec is steps[i], its status status.Steps[i].
	steps []schemas.PipelineStep
	// order is the steps' indexes in dependency order.
	order []int
	// jobs holds the running job of each step (by index), nil otherwise.
	jobs []*stepJob
	// results are what succeeded job steps pass on, by step name.
	results map[string]activities.StepResult

	stopCh     workflow.Channel
	stopReason string
	// ending is why no more steps start: endFailed or endStopped; "" while the run goes on.
	ending string
	// failedStep is the step whose failure failed the pipeline.
	failedStep string
	// events are the run's phase events (phase_events.go).
	events pipelineEvents
	// exit is the state of the onExit steps (pipeline_onexit.go).
	exit pipelineExit
}

// stepJob is a job step's running child workflow, or (backoff set) the wait before
// its next try.
type stepJob struct {
	future     workflow.ChildWorkflowFuture
	cancelling bool
	// timeout fires at the try's timeout (step_retries.go); nil without one.
	timeout       workflow.Future
	cancelTimeout workflow.CancelFunc
	timedOut      bool
	// backoff, set instead of future, ends the wait before the step's next try.
	backoff workflow.Future
	// experiment is set when future is an experiment step's Experiment
	// (pipeline_experiment.go).
	experiment *schemas.Experiment
	// fan is set, instead of future, for a fan-out step's children
	// (pipeline_fanout.go).
	fan *fanOut
}

const (
	endFailed  = "failed"
	endStopped = "stopped"
)

func (w *pipelineWorkflow) setup(ctx workflow.Context) error {
	w.uid = workflow.GetInfo(ctx).FirstRunID
	w.stopCh = workflow.NewBufferedChannel(ctx, 1)
	w.steps = w.in.Pipeline.Spec.AllSteps()
	w.order = (&schemas.PipelineSpec{Steps: w.steps}).TopoOrder()
	w.jobs = make([]*stepJob, len(w.steps))
	w.results = map[string]activities.StepResult{}
	w.status = schemas.PipelineStatus{Phase: schemas.PipelinePending, Params: w.in.Params}
	w.startPhaseEvents(ctx)
	for i, st := range w.steps {
		s := schemas.StepStatus{Name: st.Name, Phase: schemas.StepPending, OnExit: w.isExit(i)}
		if st.Job != nil && !st.FanOut() { // a fan-out step's jobs are in s.Children
			s.Job = schemas.StepJobName(w.in.Pipeline.Metadata.Name, st.Name)
		}
		w.status.Steps = append(w.status.Steps, s)
	}
	w.reuseSteps()

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (PipelineView, error) {
		return PipelineView{UID: w.uid, Pipeline: w.in.Pipeline, Status: w.status}, nil
	}); err != nil {
		return err
	}
	return setStopHandler(ctx, func() bool { return w.status.Phase.Terminal() }, &w.stopReason, w.stopCh,
		func() PipelineStopResult { return PipelineStopResult{Phase: w.status.Phase} })
}

// PipelineStopResult is the run's phase once the stop has been handled.
type PipelineStopResult struct {
	Phase schemas.PipelinePhase `json:"phase"`
}

func (w *pipelineWorkflow) run(ctx workflow.Context) (PipelineResult, error) {
	now := workflow.Now(ctx)
	w.status.StartTime = &now
	w.runPendingEvent(ctx)
	w.transition(ctx, pipelineOutcome{schemas.PipelineRunning, ReasonStarted, fmt.Sprintf("%d steps", len(w.status.Steps))})

	w.runSteps(ctx)
	w.runOnExit(ctx)
	w.finish(ctx)
	return PipelineResult{Status: w.status}, nil
}

// runSteps starts the ready steps and waits for them, and for the stop update, until
// none runs.
func (w *pipelineWorkflow) runSteps(ctx workflow.Context) {
	for {
		w.startReady(ctx)
		if !w.anyRunning() {
			break
		}
		sel := workflow.NewSelector(ctx)
		for _, i := range w.order {
			if j := w.jobs[i]; j != nil {
				w.addStepFutures(ctx, sel, i, j)
			}
		}
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			if w.ending == "" {
				w.ending = endStopped
			}
		})
		sel.Select(ctx)
		if w.ending != "" {
			w.cancelRunning(ctx)
		}
	}
}

// startReady starts every step whose dependencies have finished, until none is left: a
// condition, or a step skipped, can make further steps ready at once.
func (w *pipelineWorkflow) startReady(ctx workflow.Context) {
	for progressed := true; progressed && w.ending == ""; {
		progressed = false
		for _, i := range w.order {
			if w.status.Steps[i].Phase != schemas.StepPending || w.ending != "" {
				continue
			}
			ready, reason, why := w.readiness(i)
			if !ready {
				continue
			}
			progressed = true
			switch {
			case why != "":
				w.endStep(ctx, i, schemas.StepSkipped, reason, why)
			case w.steps[i].Condition != nil:
				w.evaluateCondition(ctx, i)
			default:
				w.startJob(ctx, i)
			}
		}
	}
}

// readiness reports whether every dependency of step i has finished and, if the step is
// to be skipped, why.
func (w *pipelineWorkflow) readiness(i int) (ready bool, reason, why string) {
	if w.isExit(i) && !w.exit.running {
		return false, "", ""
	}
	for _, d := range w.steps[i].DependsOn {
		if j := w.stepIndex(d); j >= 0 && !w.status.Steps[j].Phase.Terminal() {
			return false, "", ""
		}
	}
	for _, d := range w.steps[i].DependsOn {
		j := w.stepIndex(d)
		if j < 0 {
			continue
		}
		ds := &w.status.Steps[j]
		if ds.Phase != schemas.StepSucceeded {
			return true, ReasonDependencyNotSucceeded, fmt.Sprintf("step %s is %s", d, ds.Phase)
		}
		if ds.ConditionResult != nil && !*ds.ConditionResult {
			return true, ReasonConditionFalse, fmt.Sprintf("condition %s is false", d)
		}
	}
	return true, "", ""
}

// evaluateCondition evaluates a condition step on the parameters and the metrics of the
// steps before it.
func (w *pipelineWorkflow) evaluateCondition(ctx workflow.Context, i int) {
	st := &w.steps[i]
	now := workflow.Now(ctx)
	w.status.Steps[i].StartTime = &now
	cond, err := schemas.ParseCondition(st.Condition.Expression)
	if err != nil {
		w.endStep(ctx, i, schemas.StepFailed, ReasonInvalidCondition, err.Error())
		return
	}
	value, explain, err := cond.Eval(func(r schemas.TemplateRef) (float64, error) {
		var s string
		switch r.Root {
		case schemas.RefParams:
			v, ok := w.in.Params[r.Name]
			if !ok {
				return 0, fmt.Errorf("%s: no such parameter", r.Raw)
			}
			s = v
		case schemas.RefSteps:
			res, ok := w.results[r.Name]
			if !ok {
				return 0, fmt.Errorf("%s: step %s has not succeeded", r.Raw, r.Name)
			}
			x, ok := res.Metrics[r.Key]
			if !ok {
				return 0, fmt.Errorf("%s: step %s's job did not report %q", r.Raw, r.Name, r.Key)
			}
			return x, nil
		default:
			return 0, fmt.Errorf("%s: not a number", r.Raw)
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", r.Raw, s)
		}
		return x, nil
	})
	if err != nil {
		w.endStep(ctx, i, schemas.StepFailed, ReasonConditionNotEvaluated, err.Error())
		return
	}
	w.status.Steps[i].ConditionResult = &value
	w.endStep(ctx, i, schemas.StepSucceeded, ReasonConditionEvaluated, fmt.Sprintf("%s is %t", explain, value))
}

// startJob builds a job step's TrainingJob and starts it as a child workflow.
func (w *pipelineWorkflow) startJob(ctx workflow.Context, i int) {
	st := &w.steps[i]
	meta := w.in.Pipeline.Metadata
	now := workflow.Now(ctx)
	if w.status.Steps[i].StartTime == nil {
		w.status.Steps[i].StartTime = &now
	}

	upstream := map[string]activities.StepResult{}
	for _, d := range w.upstreamOf(i) {
		if r, ok := w.results[d]; ok {
			upstream[d] = r
		}
	}
	built, err := buildStepJob(ctx, activities.BuildStepJobInput{
		Run:      schemas.ObjectMeta{Name: meta.Name, Workspace: meta.Workspace, Labels: meta.Labels},
		Step:     *st,
		Params:   w.in.Params,
		Upstream: upstream,
		Outcome:  w.outcomeFor(i),
	})
	if err != nil {
		w.endStep(ctx, i, schemas.StepFailed, ReasonInvalidStep, rootMessage(err))
		return
	}
	if built.Experiment != nil {
		w.startExperiment(ctx, i, &built)
		return
	}
	if built.Children != nil {
		w.startFanOut(ctx, i, &built)
		return
	}
	job := &built.Job
	w.retryName(i, &built)
	// The job is stopped through its stop update (which cleans its replicas up), not by
	// Temporal closing it with the pipeline.
	fut := JobStartWithLabels(TrainingJobInput{Job: *job, Parent: w.uid}, built.LabelKeywords).ExecuteChild(ctx)
	w.jobs[i] = &stepJob{future: fut}
	w.startTimeout(ctx, i)
	previous := w.status.Steps[i].Phase
	w.status.Steps[i].Outputs = built.Outputs
	w.status.Steps[i].Phase = schemas.StepRunning
	w.status.Steps[i].Reason, w.status.Steps[i].Message = ReasonJobStarted, fmt.Sprintf("job %s started", job.Metadata.Name)
	w.stepPhaseEvent(ctx, i, previous)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var exec workflow.Execution
		if err := fut.GetChildWorkflowExecution().Get(ctx, &exec); err == nil {
			w.status.Steps[i].JobUID = exec.RunID
		}
	})
}

// upstreamOf returns the names of the steps step i depends on, directly or not.
func (w *pipelineWorkflow) upstreamOf(i int) []string {
	var out []string
	seen := make([]bool, len(w.steps))
	queue := []int{i}
	if w.isExit(i) { // an onExit step comes after every step of spec.steps
		for k := range w.in.Pipeline.Spec.Steps {
			seen[k] = true
			out = append(out, w.steps[k].Name)
		}
	}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, d := range w.steps[k].DependsOn {
			if j := w.stepIndex(d); j >= 0 && !seen[j] {
				seen[j] = true
				out = append(out, d)
				queue = append(queue, j)
			}
		}
	}
	return out
}

// jobDone records the end of step i's job.
func (w *pipelineWorkflow) jobDone(ctx workflow.Context, i int, f workflow.Future) {
	j := w.jobs[i]
	w.jobs[i] = nil
	if j.cancelTimeout != nil {
		j.cancelTimeout()
	}
	st := &w.status.Steps[i]
	var res TrainingJobResult
	err := f.Get(ctx, &res)
	if st.JobUID == "" {
		var exec workflow.Execution
		if j.future.GetChildWorkflowExecution().Get(ctx, &exec) == nil {
			st.JobUID = exec.RunID
		}
	}
	var started *temporal.ChildWorkflowExecutionAlreadyStartedError
	switch {
	case errors.As(err, &started):
		w.endStep(ctx, i, schemas.StepFailed, ReasonJobExists,
			fmt.Sprintf("a job named %s already exists in workspace %s", st.Job, w.in.Pipeline.Metadata.Workspace))
	case err != nil:
		w.tryFailed(ctx, i, ReasonJobFailed, fmt.Sprintf("job %s: %s", st.Job, rootMessage(err)))
	case res.Status.Phase == schemas.JobSucceeded:
		w.jobSucceeded(ctx, i, res.Status)
	case j.cancelling && res.Status.Phase == schemas.JobStopped:
		w.endStep(ctx, i, schemas.StepCancelled, ReasonPipelineEnded, fmt.Sprintf("job %s was stopped: the pipeline %s", st.Job, w.ending))
	case j.timedOut:
		w.tryFailed(ctx, i, ReasonStepTimeout, fmt.Sprintf("job %s ran over the step's timeout of %s and was stopped",
			st.Job, w.steps[i].Timeout.D()))
	default:
		msg := fmt.Sprintf("job %s %s", st.Job, strings.ToLower(string(res.Status.Phase)))
		if res.Status.Message != "" {
			msg += ": " + res.Status.Message
		}
		w.tryFailed(ctx, i, "Job"+string(res.Status.Phase), msg)
	}
}

// jobSucceeded reads the job's last metrics and records the step's outputs.
func (w *pipelineWorkflow) jobSucceeded(ctx workflow.Context, i int, js schemas.JobStatus) {
	st := &w.status.Steps[i]
	metrics, err := jobMetrics(ctx, activities.JobMetricsInput{
		Workspace: w.in.Pipeline.Metadata.Workspace, Job: st.Job, UID: st.JobUID,
	})
	if err != nil {
		w.endStep(ctx, i, schemas.StepFailed, ReasonMetricsUnavailable,
			fmt.Sprintf("job %s succeeded but its metrics could not be read: %s", st.Job, rootMessage(err)))
		return
	}
	outputs := st.Outputs
	if outputs == nil {
		outputs = map[string]string{}
	}
	if js.LastCheckpoint != "" {
		outputs[schemas.OutputCheckpoint] = js.LastCheckpoint
	}
	st.Outputs = outputs
	if len(metrics.Values) > 0 {
		st.Metrics = metrics.Values
	}
	w.results[st.Name] = activities.StepResult{Outputs: outputs, Metrics: metrics.Values}
	w.endStep(ctx, i, schemas.StepSucceeded, ReasonJobSucceeded, fmt.Sprintf("job %s succeeded", st.Job))
}

// cancelRunning stops every running job once the pipeline has failed or been stopped,
// and waits until each stop has been handled. The jobs' futures then complete, and
// jobDone marks their steps Cancelled.
func (w *pipelineWorkflow) cancelRunning(ctx workflow.Context) {
	reason := "the pipeline failed"
	if w.ending == endStopped {
		reason = "the pipeline was stopped: " + w.stopReason
	}
	var stops []doneFuture
	var stopped []int
	for _, i := range w.order {
		j := w.jobs[i]
		if j != nil && j.backoff != nil {
			w.cancelRetry(ctx, i)
			continue
		}
		if j != nil && j.fan != nil {
			w.stopFanOut(ctx, i, j.fan, reason, &stops)
			continue
		}
		if j == nil || j.cancelling {
			continue
		}
		j.cancelling = true
		// Stop only a job that has started: one whose start failed ends on its own.
		if err := j.future.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			continue
		}
		stopped = append(stopped, i)
		stops = append(stops, stopJob(ctx, activities.StopJobInput{
			WorkflowID: w.stepWorkflowID(i),
			UpdateName: UpdateStop,
			Reason:     reason,
		}))
	}
	for _, f := range stops {
		if err := f.wait(ctx); err != nil {
			w.logger.Error("could not stop a step's job", "error", err)
		}
	}
	w.experimentsStopped(ctx, stopped)
}

// endStep moves a step to a terminal phase. A failed step fails the pipeline.
func (w *pipelineWorkflow) endStep(ctx workflow.Context, i int, phase schemas.StepPhase, reason, msg string) {
	st := &w.status.Steps[i]
	now := workflow.Now(ctx)
	if st.StartTime == nil && phase != schemas.StepSkipped {
		st.StartTime = &now
	}
	st.FinishTime = &now
	previous := st.Phase
	st.Phase, st.Reason, st.Message = phase, reason, msg
	w.stepPhaseEvent(ctx, i, previous)
	if phase == schemas.StepFailed && w.isExit(i) {
		// A failed onExit step does not stop the others (pipeline_onexit.go).
		w.exit.failed = append(w.exit.failed, st.Name)
	} else if phase == schemas.StepFailed && w.ending == "" {
		w.ending, w.failedStep = endFailed, st.Name
	}
}

func (w *pipelineWorkflow) anyRunning() bool {
	for _, j := range w.jobs {
		if j != nil {
			return true
		}
	}
	return false
}

// finish skips the steps that never started, enters the terminal phase and waits until
// every update is handled.
func (w *pipelineWorkflow) finish(ctx workflow.Context) {
	w.skipPending(ctx, len(w.steps))
	now := workflow.Now(ctx)
	w.status.FinishTime = &now
	w.transition(ctx, w.exitOutcome(w.stepsOutcome(len(w.steps))))
	st := w.status
	recordRun(ctx, w.logger, activities.RecordRunInput{UID: w.uid, Pipeline: &w.in.Pipeline, PipelineStatus: &st})
	w.drainPhaseEvents(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// skipPending skips the steps among the first n that never started.
func (w *pipelineWorkflow) skipPending(ctx workflow.Context, n int) {
	skipReason, skipMsg := "", ""
	switch w.ending {
	case endFailed:
		skipReason, skipMsg = ReasonPipelineFailed, fmt.Sprintf("step %s failed", w.failedStep)
	case endStopped:
		skipReason, skipMsg = ReasonPipelineStopped, "the pipeline was stopped"
	}
	for i := range w.status.Steps[:n] {
		if w.status.Steps[i].Phase == schemas.StepPending {
			w.endStep(ctx, i, schemas.StepSkipped, skipReason, skipMsg)
		}
	}
}

// stepsOutcome is the run's outcome from how its first n steps ended.
func (w *pipelineWorkflow) stepsOutcome(n int) pipelineOutcome {
	switch w.ending {
	case endStopped:
		return pipelineOutcome{schemas.PipelineStopped, ReasonStopRequested, w.stopReason}
	case endFailed:
		msg := fmt.Sprintf("step %s failed", w.failedStep)
		if st := w.status.Step(w.failedStep); st != nil && st.Message != "" {
			msg += ": " + st.Message
		}
		return pipelineOutcome{schemas.PipelineFailed, ReasonStepFailed, msg}
	}
	succeeded, skipped := 0, 0
	for _, st := range w.status.Steps[:n] {
		switch st.Phase {
		case schemas.StepSucceeded:
			succeeded++
		case schemas.StepSkipped:
			skipped++
		}
	}
	return pipelineOutcome{schemas.PipelineSucceeded, ReasonAllStepsDone, fmt.Sprintf("%d steps succeeded, %d skipped", succeeded, skipped)}
}

// pipelineOutcome is a phase of a pipeline run with its reason and message.
type pipelineOutcome = outcome[schemas.PipelinePhase]

// transition moves the run to a phase and upserts the DlcPhase search attribute.
func (w *pipelineWorkflow) transition(ctx workflow.Context, to pipelineOutcome) {
	previous := w.status.Phase
	w.status.Phase, w.status.Reason, w.status.Message = to.phase, to.reason, to.message
	w.runPhaseEvent(ctx, previous)
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(string(to.phase))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}
}
