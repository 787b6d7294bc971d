package workflows

import (
	"fmt"
	"math"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// Trials of the Experiment workflow: starting them parallelism at a time, running each
// attempt as a child TrainingJob, reading its metric reports back, and stopping its job.

// Limits of the Experiment workflow.
const (
	// maxTrialReports bounds the reports kept per trial; beyond, every other one is
	// dropped (the last is always kept), so the state stays small enough to carry.
	maxTrialReports = 50
)

// Why the experiment stopped a trial's job.
type stopKind int

const (
	stopNone       stopKind = iota
	stopPruned              // the early-stopping rule fired
	stopExperiment          // the experiment is stopping or ending
	stopDiverged            // the objective was NaN or infinite: a failed objective
)

// trialRun is what the workflow knows of a running trial that is not worth carrying
// across continue-as-new (no trial runs then).
type trialRun struct {
	// wake receives a value when the trial's goroutine has a stop to send.
	wake       workflow.Channel
	stop       stopKind
	stopReason string
	stopSent   bool
	stopDone   workflow.Future
	uid        string
	lastSeq    uint64
	ordinal    int64
	childDone  bool
	// carried is set on a trial whose job an earlier run started: its first attempt
	// follows that job instead of starting one.
	carried bool
}

// startTrials starts what may start while a slot is free: stopped trials again (after
// resume), then new trials, each as soon as a slot frees (experiment_slots.go).
func (w *experimentWorkflow) startTrials(ctx workflow.Context) {
	w.fillSlots(ctx, func(n int) *TrialState {
		if q, ok := w.popQueued(); ok {
			w.changed = true
			return &TrialState{ID: n, Params: q.Params, Phase: schemas.TrialPending, Enqueued: true}
		}
		if w.st.Exhausted {
			return nil
		}
		sug := w.suggest(ctx, n)
		if sug.Exhausted {
			w.st.Exhausted = true
			w.changed = true
			return nil
		}
		if sug.Err != "" {
			w.suggestFailed(n, sug.Err)
			return nil
		}
		return &TrialState{ID: n, Params: sug.Params, Phase: schemas.TrialPending}
	})
}

// fillSlots starts trials while a slot is free: a stopped trial again (after resume),
// else, below MaxTrials, the new trial next makes for index n. It stops when next
// answers nil (nothing may start now).
func (w *experimentWorkflow) fillSlots(ctx workflow.Context, next func(n int) *TrialState) {
	p := w.parallelism()
	for w.running < p {
		if t := w.firstStopped(); t != nil {
			t.Attempt++
			w.startTrial(ctx, t)
			continue
		}
		n := len(w.st.Trials)
		if n >= w.st.MaxTrials {
			return
		}
		t := next(n)
		if t == nil {
			return
		}
		w.st.Trials = append(w.st.Trials, t)
		w.startTrial(ctx, t)
	}
}

// suggestFailed ends the experiment: the algorithm failed to suggest trial n.
func (w *experimentWorkflow) suggestFailed(n int, msg string) {
	w.end(experimentOutcome{schemas.ExperimentFailed, ReasonAlgorithmFailed, fmt.Sprintf("suggesting trial %d: %s", n, msg)})
}

func (w *experimentWorkflow) firstStopped() *TrialState {
	for _, t := range w.st.Trials {
		if t.Phase == schemas.TrialStopped {
			return t
		}
	}
	return nil
}

func (w *experimentWorkflow) startTrial(ctx workflow.Context, t *TrialState) {
	for len(w.runs) <= t.ID {
		w.runs = append(w.runs, nil)
	}
	run := &trialRun{wake: workflow.NewBufferedChannel(ctx, 1)}
	w.runs[t.ID] = run
	w.running++
	t.Phase = schemas.TrialRunning
	workflow.Go(ctx, func(ctx workflow.Context) { w.runTrial(ctx, t, run) })
}

// Outcomes of one attempt of a trial.
type attemptOutcome int

const (
	attemptCompleted attemptOutcome = iota
	attemptPruned
	attemptStopped
	attemptFailed
)

// runTrial runs a trial's jobs, retrying a failed one within spec.maxTrialRetries,
// and records its outcome.
func (w *experimentWorkflow) runTrial(ctx workflow.Context, t *TrialState, run *trialRun) {
	defer func() {
		w.runs[t.ID] = nil
		w.running--
		w.changed = true
	}()
	for {
		if !run.carried {
			now := workflow.Now(ctx)
			t.Job = TrialJobName(w.exp.Metadata.Name, t.ID, t.Attempt)
			t.Phase, t.StartTime, t.FinishTime = schemas.TrialRunning, &now, nil
			t.Reports, t.Value, t.Step, t.Message, t.Values = nil, nil, 0, "", nil
			w.trialEvent(ctx, t)
		}

		outcome, msg := w.runAttempt(ctx, t, run)
		// A new variable: t.StartTime points at now.
		finished := workflow.Now(ctx)
		t.FinishTime, t.Message = &finished, msg
		switch outcome {
		case attemptCompleted:
			t.Phase = schemas.TrialCompleted
		case attemptPruned:
			t.Phase = schemas.TrialPruned
		case attemptStopped:
			t.Phase = schemas.TrialStopped
		case attemptFailed:
			t.Phase = schemas.TrialFailed
			t.Failures++
			if t.Failures <= w.maxRetries() && run.stop == stopNone && w.ending == nil &&
				w.st.Phase == schemas.ExperimentRunning {
				t.Message = msg + "; retrying"
				w.trialEvent(ctx, t)
				t.Attempt++
				t.Aggs = nil
				*run = trialRun{wake: run.wake}
				continue
			}
		}
		w.trialEvent(ctx, t)
		if t.Phase == schemas.TrialCompleted && t.Value != nil && w.exp.Spec.PrimaryObjective().Reached(*t.Value) && w.feasible(t) {
			w.end(experimentOutcome{schemas.ExperimentSucceeded, ReasonGoalReached, fmt.Sprintf("trial %d reached the goal: %s = %g", t.ID, w.exp.Spec.PrimaryObjective().Metric, *t.Value)})
		}
		return
	}
}

// runAttempt runs one job of a trial as a child workflow, follows its metric reports
// until it ends, and says how the attempt went.
func (w *experimentWorkflow) runAttempt(ctx workflow.Context, t *TrialState, run *trialRun) (attemptOutcome, string) {
	var child workflow.Future
	if run.carried {
		// An earlier run started the job and continued as new (experiment_continue.go).
		run.carried = false
		child = w.followJob(ctx, t)
	} else {
		job, err := w.exp.TrialJob(t.Job, t.ID, w.templateValues(t.Params))
		if err != nil {
			return attemptFailed, err.Error()
		}
		w.pbtJob(t, &job)
		// The experiment stops its trials itself; a trial whose experiment was terminated
		// runs to its end and cleans up after itself.
		c := TrialJobStart(TrainingJobInput{Job: job, Params: w.paramValues(t.Params), Parent: w.st.UID}).ExecuteChild(ctx)
		var exec workflow.Execution
		if err := c.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
			return attemptFailed, fmt.Sprintf("could not start job %s: %s", t.Job, rootMessage(err))
		}
		run.uid = exec.RunID
		w.changed = true // the trial can now be carried across continue-as-new
		child = c
	}

	var res TrainingJobResult
	var childErr error
	for !run.childDone {
		pctx, cancelPoll := workflow.WithCancel(ctx)
		poll := watchTrialMetrics(pctx, w.opts.MetricsWait, w.watchInput(t, run, false))
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(child, func(f workflow.Future) {
			childErr = f.Get(ctx, &res)
			run.childDone = true
		})
		sel.AddFuture(poll.Future, func(f workflow.Future) {
			var got activities.WatchTrialMetricsResult
			if err := f.Get(ctx, &got); err != nil {
				w.logger.Warn("reading trial metrics failed", "job", t.Job, "error", err)
				return
			}
			w.addReports(ctx, t, run, got)
		})
		sel.AddReceive(run.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		// A poll still pending is abandoned: the next one reads again from lastSeq.
		cancelPoll()
		w.sendStop(ctx, t, run)
	}
	// The job has ended, so every report it made is in the stream: read the rest.
	if got, err := watchTrialMetrics(ctx, w.opts.MetricsWait, w.watchInput(t, run, true)).get(ctx); err != nil {
		w.logger.Warn("reading the last trial metrics failed", "job", t.Job, "error", err)
	} else {
		w.addReports(ctx, t, run, got)
	}
	if run.stopDone != nil {
		_ = run.stopDone.Get(ctx, nil)
	}

	metric := w.exp.Spec.PrimaryObjective().Metric
	switch {
	case run.stop == stopPruned:
		return attemptPruned, run.stopReason
	case run.stop == stopDiverged:
		return attemptFailed, run.stopReason
	case childErr != nil:
		return attemptFailed, fmt.Sprintf("job %s: %s", t.Job, rootMessage(childErr))
	case res.Status.Phase == schemas.JobSucceeded && t.Value == nil && w.missingComponents(t) != "":
		return attemptFailed, fmt.Sprintf("job %s succeeded without reporting %s (of the weighted objective %s)", t.Job, w.missingComponents(t), metric)
	case res.Status.Phase == schemas.JobSucceeded && t.Value == nil:
		return attemptFailed, fmt.Sprintf("job %s succeeded without reporting %s", t.Job, metric)
	case res.Status.Phase == schemas.JobSucceeded && w.missingObjective(t) != "":
		return attemptFailed, fmt.Sprintf("job %s succeeded without reporting %s", t.Job, w.missingObjective(t))
	case res.Status.Phase == schemas.JobSucceeded:
		return attemptCompleted, ""
	case run.stop == stopExperiment:
		return attemptStopped, run.stopReason
	default:
		msg := fmt.Sprintf("job %s ended %s", t.Job, res.Status.Phase)
		if res.Status.Message != "" {
			msg += ": " + res.Status.Message
		}
		return attemptFailed, msg
	}
}

func (w *experimentWorkflow) watchInput(t *TrialState, run *trialRun, drain bool) activities.WatchTrialMetricsInput {
	return activities.WatchTrialMetricsInput{
		Workspace: w.exp.Metadata.Workspace, Job: t.Job, UID: run.uid,
		Metric: w.exp.Spec.PrimaryObjective().Metric, StepMetric: w.exp.Spec.PrimaryObjective().StepMetric,
		AfterSeq: run.lastSeq, MaxWait: w.opts.MetricsWait, Drain: drain, Others: w.watchedMetrics(),
		Components: w.componentMetrics(),
	}
}

// numberedReport is a report with its step.
type numberedReport struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
	// NonFinite names a NaN or infinite objective (Value is then 0).
	NonFinite string `json:"nonFinite,omitempty"`
}

// number gives new reports their steps: the step metric's value, or else their position
// among the attempt's reports.
func (run *trialRun) number(got activities.WatchTrialMetricsResult) []numberedReport {
	out := make([]numberedReport, 0, len(got.Reports))
	for _, r := range got.Reports {
		run.ordinal++
		step := run.ordinal
		if r.Step != nil {
			step = *r.Step
		}
		out = append(out, numberedReport{Step: step, Value: r.Value, NonFinite: r.NonFinite})
	}
	return out
}

// addReports records new reports of a trial in order and applies the early-stopping
// rule at each. Once the rule has fired, later reports are ignored: the trial's value
// is the one it had where it was stopped. A NaN or infinite objective is a failed
// objective: it is not recorded (so it can neither be the best value nor reach the
// early-stopping rule), the trial's job is stopped and the trial fails, without retry.
func (w *experimentWorkflow) addReports(ctx workflow.Context, t *TrialState, run *trialRun, got activities.WatchTrialMetricsResult) {
	run.lastSeq = max(run.lastSeq, got.LastSeq)
	w.addOthers(t, got.Others)
	w.addComponents(t, run, got.Components)
	reps := run.number(got)
	if run.stop == stopPruned || run.stop == stopDiverged || len(reps) == 0 {
		return
	}
	for i, r := range reps {
		if r.NonFinite != "" {
			reps = reps[:i]
			defer w.requestStop(run, stopDiverged, fmt.Sprintf("failed objective: %s = %s at step %d",
				w.exp.Spec.PrimaryObjective().Metric, r.NonFinite, r.Step))
			break
		}
	}
	if len(reps) == 0 {
		return
	}
	prune := -1
	if run.stop == stopNone && w.exp.Spec.EarlyStopping.Rule != schemas.EarlyStoppingNone {
		// Recorded for the same reason as suggestions.
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return w.firstPrune(t, reps) }).Get(&prune); err != nil {
			w.logger.Warn("early-stopping decision failed", "job", t.Job, "error", err)
			prune = -1
		}
	}
	weighted := w.exp.Spec.PrimaryObjective().Weighted()
	for i, r := range reps {
		t.Reports = withReport(t.Reports, r.Step, r.Value)
		v := r.Value
		if !weighted { // a weighted objective's value is its metrics' (addComponents)
			agg := w.reportValue(t, v)
			t.Value = &agg
		}
		t.Step = r.Step
		if i == prune {
			w.requestStop(run, stopPruned, fmt.Sprintf("stopped early at step %d by rule %s: %s = %g",
				r.Step, w.exp.Spec.EarlyStopping.Rule, w.exp.Spec.PrimaryObjective().Metric, v))
			return
		}
	}
}

// withReport returns reports with a new one at step: a step at or before the last one
// (another replica, a restarted attempt) replaces what was reported from there on.
// reports itself is not changed.
func withReport(reports []schemas.TrialReport, step int64, value float64) []schemas.TrialReport {
	n := len(reports)
	for n > 0 && reports[n-1].Step >= step {
		n--
	}
	out := append(reports[:n:n], schemas.TrialReport{Step: step, Value: value})
	if len(out) > maxTrialReports {
		out = thinReports(out)
	}
	return out
}

// thinReports drops every other report but the last.
func thinReports(r []schemas.TrialReport) []schemas.TrialReport {
	out := make([]schemas.TrialReport, 0, len(r)/2+1)
	for i := 0; i < len(r)-1; i += 2 {
		out = append(out, r[i])
	}
	return append(out, r[len(r)-1])
}

// requestStop records why a trial is to be stopped and wakes its goroutine, which
// sends the stop.
func (w *experimentWorkflow) requestStop(run *trialRun, kind stopKind, reason string) {
	if run.stop != stopNone {
		return
	}
	run.stop, run.stopReason = kind, reason
	run.wake.SendAsync(true)
}

// sendStop sends the pending stop of a trial's job through the job's stop update.
func (w *experimentWorkflow) sendStop(ctx workflow.Context, t *TrialState, run *trialRun) {
	if run.stop == stopNone || run.stopSent || run.childDone {
		return
	}
	run.stopSent = true
	run.wake.ReceiveAsync(nil) // the stop is being sent: nothing more to wake for
	run.stopDone = stopTrialJob(ctx, activities.StopTrialJobInput{
		WorkflowID: JobWorkflowID(w.exp.Metadata.Workspace, t.Job),
		UpdateName: UpdateStop,
		Request:    StopRequest{Reason: run.stopReason},
	})
}

func (w *experimentWorkflow) stopAll(reason string) {
	for _, run := range w.runs {
		if run != nil {
			w.requestStop(run, stopExperiment, reason)
		}
	}
	w.changed = true
}

// paramValues are a trial's parameters as the trial job gets them in DLC_PARAMS and
// the API shows them: numbers, a categorical parameter's choice as a number, boolean or
// string.
func (w *experimentWorkflow) paramValues(params map[string]float64) map[string]any {
	params = hpo.ActiveParams(w.space, params) // a conditional parameter only when active
	out := make(map[string]any, len(params))
	for _, ps := range w.exp.Spec.SearchSpace {
		v, ok := params[ps.Name]
		if !ok {
			continue
		}
		if ps.Type == schemas.ParameterCategorical {
			i := int(math.Round(v))
			if i >= 0 && i < len(ps.Values) {
				out[ps.Name] = ps.Values[i].JSONValue()
			}
			continue
		}
		out[ps.Name] = v
	}
	return out
}

// templateValues are the values of ${params.NAME} in a trial's job: the active
// parameters formatted, an inactive one empty.
func (w *experimentWorkflow) templateValues(params map[string]float64) map[string]string {
	out := hpo.Format(w.space, hpo.ActiveParams(w.space, params))
	for _, p := range w.space {
		if _, ok := out[p.Name]; !ok {
			out[p.Name] = ""
		}
	}
	return out
}
