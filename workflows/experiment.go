package workflows

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// An Experiment is one workflow (id ExperimentWorkflowID) that holds the search: the
// spec, the seed and every trial with its parameters, reports and outcome. Trials run
// as child TrainingJob workflows, parallelism at a time. The design choices that make
// it reproducible and crash-safe (see docs/experiments.md):
//
//   - Suggestions are made in workflow code by the pure samplers of package hpo. Trial N
//     starts only once trials 0..N-parallelism have finished, and the sampler sees those
//     finished trials plus trials N-parallelism+1..N-1 as Running with their parameters
//     only. What it sees is therefore the same whatever the order in which trials
//     finish, so the same seed gives the same parameters in every run, replayed or not.
//   - Early stopping compares trial N with the same finished trials 0..N-parallelism,
//     report by report in step order, and a trial is Pruned at the step where the rule
//     fired, whatever it reported after: the decisions do not depend on timing either.
//   - Metric reports are read back from the trial job's metric subject in JetStream by
//     the WatchTrialMetrics activity, from a stream sequence the workflow remembers; the
//     activity's result is in history, so a retried or replayed read neither loses nor
//     repeats a report. After a trial's job ends, one more read drains what is left.
//   - Before its history grows large the experiment starts no more trials, waits for
//     the running ones, and continues as new with its state.

// ExperimentInput starts (or continues) an Experiment workflow.
type ExperimentInput struct {
	// Experiment is the validated, defaulted spec.
	Experiment schemas.Experiment `json:"experiment"`
	// State is the experiment's state carried across continue-as-new; nil at first.
	State *ExperimentState `json:"state,omitempty"`
	// Options tune the workflow; the zero value is right outside tests.
	Options ExperimentOptions `json:"options,omitzero"`
}

// ExperimentOptions tune the Experiment workflow.
type ExperimentOptions struct {
	// MaxHistoryEvents: once a run's history has this many events (or Temporal suggests
	// it), the experiment starts no more trials, waits for the running ones and
	// continues as new. Default 8000.
	MaxHistoryEvents int `json:"maxHistoryEvents,omitempty"`
	// MetricsWait bounds one WatchTrialMetrics call while no report comes. Default 5m.
	MetricsWait time.Duration `json:"metricsWait,omitempty"`
	// ResumeWindow is how long a Stopped experiment waits for resume before its
	// workflow ends. Default 7 days.
	ResumeWindow time.Duration `json:"resumeWindow,omitempty"`
}

func (o ExperimentOptions) withDefaults() ExperimentOptions {
	if o.MaxHistoryEvents <= 0 {
		o.MaxHistoryEvents = 8000
	}
	if o.MetricsWait <= 0 {
		o.MetricsWait = 5 * time.Minute
	}
	if o.ResumeWindow <= 0 {
		o.ResumeWindow = 7 * 24 * time.Hour
	}
	return o
}

// ExperimentState is everything an experiment knows, carried across continue-as-new.
type ExperimentState struct {
	// UID is the first run's id: it tells apart experiments of the same name.
	UID       string                  `json:"uid"`
	Seed      int64                   `json:"seed"`
	MaxTrials int                     `json:"maxTrials"`
	Phase     schemas.ExperimentPhase `json:"phase"`
	Reason    string                  `json:"reason,omitempty"`
	Message   string                  `json:"message,omitempty"`
	Trials    []*TrialState           `json:"trials"`
	// Exhausted is set when the sampler has no configuration left (grid).
	Exhausted bool `json:"exhausted,omitempty"`
	// EventSeq numbers the experiment's events across runs.
	EventSeq   int        `json:"eventSeq"`
	Runs       int        `json:"runs"`
	StartTime  time.Time  `json:"startTime"`
	FinishTime *time.Time `json:"finishTime,omitempty"`
}

// TrialState is one trial.
type TrialState struct {
	ID int `json:"id"`
	// Params are the sampler's values: numbers, a categorical parameter's as the index
	// of its choice.
	Params map[string]float64 `json:"params"`
	Phase  schemas.TrialPhase `json:"phase"`
	Job    string             `json:"job"`
	// Attempt numbers the trial's jobs from 0; Failures counts the failed ones.
	Attempt    int                   `json:"attempt"`
	Failures   int                   `json:"failures,omitempty"`
	Reports    []schemas.TrialReport `json:"reports,omitempty"`
	Value      *float64              `json:"value,omitempty"`
	Step       int64                 `json:"step,omitempty"`
	Message    string                `json:"message,omitempty"`
	StartTime  *time.Time            `json:"startTime,omitempty"`
	FinishTime *time.Time            `json:"finishTime,omitempty"`
}

// ExperimentView is what the status query returns.
type ExperimentView struct {
	UID        string                   `json:"uid"`
	Experiment schemas.Experiment       `json:"experiment"`
	Status     schemas.ExperimentStatus `json:"status"`
}

// ExperimentResult is the experiment's final status.
type ExperimentResult struct {
	Status schemas.ExperimentStatus `json:"status"`
}

// ResumeRequest asks a Stopped experiment to carry on.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ExtendRequest raises an experiment's maxTrials.
type ExtendRequest struct {
	MaxTrials int `json:"maxTrials"`
}

// ExperimentUpdateResult is the experiment's phase and trial limit once an update has
// been handled.
type ExperimentUpdateResult struct {
	Phase     schemas.ExperimentPhase `json:"phase"`
	MaxTrials int                     `json:"maxTrials"`
}

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
}

// experimentOutcome is the phase an experiment moves to, or ends in once its running
// trials have stopped.
type experimentOutcome = outcome[schemas.ExperimentPhase]

// ExperimentWorkflow runs a hyper-parameter search: it suggests trials, runs each as a
// child TrainingJob, reads their objective from their metric reports, stops the losing
// ones early, and records the best. Updates: stop, resume, extend; query: status.
func ExperimentWorkflow(ctx workflow.Context, in ExperimentInput) (ExperimentResult, error) {
	w := &experimentWorkflow{in: in, exp: &in.Experiment, opts: in.Options.withDefaults(), logger: workflow.GetLogger(ctx)}
	if err := w.setup(ctx); err != nil {
		return ExperimentResult{}, err
	}
	return w.run(ctx)
}

type experimentWorkflow struct {
	in     ExperimentInput
	exp    *schemas.Experiment
	opts   ExperimentOptions
	logger log.Logger
	st     *ExperimentState

	space     hpo.Space
	sampler   hpo.Sampler
	stopper   hpo.Stopper
	configErr error

	runs     []*trialRun // by trial ID; nil when the trial does not run
	running  int
	changed  bool
	ending   *experimentOutcome
	draining bool

	// events holds the trial events not yet published.
	events *outbox
}

func (w *experimentWorkflow) setup(ctx workflow.Context) error {
	if w.in.State != nil {
		w.st = w.in.State
	} else {
		uid := workflow.GetInfo(ctx).FirstRunID
		seed := w.exp.Spec.Algorithm.Seed
		if seed == 0 {
			seed = seedFrom(uid)
		}
		w.st = &ExperimentState{UID: uid, Seed: seed, MaxTrials: int(w.exp.Spec.MaxTrials),
			Phase: schemas.ExperimentPending, Trials: []*TrialState{}, StartTime: workflow.Now(ctx)}
	}
	w.st.Runs++
	w.space = searchSpace(w.exp.Spec.SearchSpace)
	if err := hpo.Validate(w.space); err != nil {
		w.configErr = err
	} else if w.sampler, err = newSampler(w.exp.Spec.Algorithm); err != nil {
		w.configErr = err
	} else if w.stopper, err = newStopper(w.exp.Spec.EarlyStopping); err != nil {
		w.configErr = err
	}

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ExperimentView, error) {
		return ExperimentView{UID: w.st.UID, Experiment: *w.exp, Status: w.status()}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateStop, w.handleStop,
		workflow.UpdateHandlerOptions{Validator: func(req StopRequest) error {
			if len(req.Reason) > 1024 {
				return errors.New("reason: must be at most 1024 characters")
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume, w.handleResume,
		workflow.UpdateHandlerOptions{Validator: func(req ResumeRequest) error {
			if w.st.Phase.Terminal() || w.ending != nil {
				return fmt.Errorf("the experiment has ended (%s)", w.st.Phase)
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateExtend, w.handleExtend,
		workflow.UpdateHandlerOptions{Validator: func(req ExtendRequest) error {
			switch {
			case w.st.Phase.Terminal() || w.ending != nil:
				return fmt.Errorf("the experiment has ended (%s)", w.st.Phase)
			case w.st.Exhausted:
				return errors.New("the search space is exhausted: there is nothing left to try")
			case req.MaxTrials <= w.st.MaxTrials:
				return fmt.Errorf("maxTrials: must be greater than the current %d", w.st.MaxTrials)
			case req.MaxTrials > schemas.MaxExperimentTrials:
				return fmt.Errorf("maxTrials: must be at most %d", schemas.MaxExperimentTrials)
			}
			return nil
		}}); err != nil {
		return err
	}
	w.events = newOutbox(ctx, "trial events")
	return nil
}

// seedFrom derives a seed from the experiment's uid when the spec gives none.
func seedFrom(uid string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int64(h.Sum64() & math.MaxInt64)
}

func (w *experimentWorkflow) run(ctx workflow.Context) (ExperimentResult, error) {
	if w.configErr != nil {
		return w.finish(ctx, experimentOutcome{schemas.ExperimentFailed, "InvalidSpec", w.configErr.Error()})
	}
	if w.st.Phase == schemas.ExperimentPending {
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentRunning, "Started", fmt.Sprintf("searching with %s, %d trial(s) at a time", w.exp.Spec.Algorithm.Name, w.parallelism())})
	} else {
		w.upsertPhase(ctx)
	}
	for {
		w.changed = false
		if w.st.Phase == schemas.ExperimentRunning && w.ending == nil {
			w.checkFailures(ctx)
		}
		if w.st.Phase == schemas.ExperimentRunning && w.ending == nil && !w.draining {
			w.startTrials(ctx)
		}
		if w.running == 0 {
			switch {
			case w.ending != nil:
				return w.finish(ctx, *w.ending)
			case w.st.Phase == schemas.ExperimentStopping:
				w.setPhase(ctx, experimentOutcome{schemas.ExperimentStopped, w.st.Reason, w.st.Message})
			case w.st.Phase == schemas.ExperimentRunning && w.allDone():
				return w.finishSearch(ctx)
			case w.st.Phase == schemas.ExperimentRunning && w.draining:
				return ExperimentResult{}, w.continueAsNew(ctx)
			}
		}
		if w.st.Phase == schemas.ExperimentStopped {
			ok, err := workflow.AwaitWithTimeout(ctx, w.opts.ResumeWindow, func() bool { return w.changed })
			if err != nil {
				return ExperimentResult{}, err
			}
			if !ok {
				return w.finish(ctx, experimentOutcome{schemas.ExperimentStopped, "NotResumed", fmt.Sprintf("not resumed within %s of being stopped", w.opts.ResumeWindow)})
			}
			continue
		}
		if err := workflow.Await(ctx, func() bool { return w.changed }); err != nil {
			return ExperimentResult{}, err
		}
		if !w.draining && w.shouldContinueAsNew(ctx) {
			w.draining = true
			w.logger.Info("history is large: no new trials until the running ones end, then continue-as-new",
				"events", workflow.GetInfo(ctx).GetCurrentHistoryLength())
		}
	}
}

func (w *experimentWorkflow) parallelism() int {
	return max(int(w.exp.Spec.Parallelism), 1)
}

func (w *experimentWorkflow) maxFailed() int {
	if n := w.exp.Spec.MaxFailedTrials; n != nil {
		return int(*n)
	}
	return schemas.DefaultMaxFailedTrials
}

func (w *experimentWorkflow) maxRetries() int {
	if n := w.exp.Spec.MaxTrialRetries; n != nil {
		return int(*n)
	}
	return schemas.DefaultMaxTrialRetries
}

// checkFailures ends the experiment Failed once more trials failed than it tolerates.
func (w *experimentWorkflow) checkFailures(ctx workflow.Context) {
	failed := 0
	for _, t := range w.st.Trials {
		if t.Phase == schemas.TrialFailed {
			failed++
		}
	}
	if failed > w.maxFailed() {
		w.end(experimentOutcome{schemas.ExperimentFailed, "TooManyFailedTrials", fmt.Sprintf("%d trials failed; spec.maxFailedTrials is %d", failed, w.maxFailed())})
	}
}

// allDone reports whether every trial that will be run has finished.
func (w *experimentWorkflow) allDone() bool {
	if len(w.st.Trials) < w.st.MaxTrials && !w.st.Exhausted {
		return false
	}
	for _, t := range w.st.Trials {
		if !t.Phase.Final() {
			return false
		}
	}
	return true
}

// startTrials starts what may start: stopped trials again (after resume), then new
// trials. Trial N starts only once trials 0..N-parallelism have finished.
func (w *experimentWorkflow) startTrials(ctx workflow.Context) {
	p := w.parallelism()
	for w.running < p {
		if t := w.firstStopped(); t != nil {
			t.Attempt++
			w.startTrial(ctx, t)
			continue
		}
		n := len(w.st.Trials)
		if n >= w.st.MaxTrials || w.st.Exhausted {
			return
		}
		for k := 0; k <= n-p; k++ {
			if !w.st.Trials[k].Phase.Final() {
				return
			}
		}
		sug := w.suggest(ctx, n)
		if sug.Exhausted {
			w.st.Exhausted = true
			w.changed = true
			return
		}
		if sug.Err != "" {
			w.end(experimentOutcome{schemas.ExperimentFailed, "AlgorithmFailed", fmt.Sprintf("suggesting trial %d: %s", n, sug.Err)})
			return
		}
		t := &TrialState{ID: n, Params: sug.Params, Phase: schemas.TrialPending}
		w.st.Trials = append(w.st.Trials, t)
		w.startTrial(ctx, t)
	}
}

// suggestion is what the sampler answered for one trial.
type suggestion struct {
	Params    map[string]float64 `json:"params,omitempty"`
	Exhausted bool               `json:"exhausted,omitempty"`
	Err       string             `json:"err,omitempty"`
}

// suggest asks the sampler for trial n's parameters. The sampler is a pure function of
// what it is given, so a first execution is reproducible; the answer is still recorded
// (SideEffect) so that a replay reads it back and a later change to package hpo cannot
// make a running experiment's history non-deterministic.
func (w *experimentWorkflow) suggest(ctx workflow.Context, n int) suggestion {
	var sug suggestion
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		params, err := w.sampler.Suggest(w.samplerHistory(n), n)
		switch {
		case errors.Is(err, hpo.ErrExhausted):
			return suggestion{Exhausted: true}
		case err != nil:
			return suggestion{Err: err.Error()}
		}
		return suggestion{Params: params}
	}).Get(&sug)
	if err != nil {
		return suggestion{Err: err.Error()}
	}
	return sug
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

// samplerHistory is what the sampler sees when it suggests trial n: trials
// 0..n-parallelism as they finished, and the others only as Running with their
// parameters, so that the suggestion does not depend on which of them finished first.
func (w *experimentWorkflow) samplerHistory(n int) hpo.History {
	h := w.history()
	for k := 0; k < n; k++ {
		t := w.st.Trials[k]
		if k <= n-w.parallelism() {
			h.Trials = append(h.Trials, hpoTrial(t))
		} else {
			h.Trials = append(h.Trials, hpo.Trial{ID: t.ID, Params: t.Params, State: hpo.TrialRunning})
		}
	}
	return h
}

// stopperHistory is what the early-stopping rule compares trial id with: trials
// 0..id-parallelism, which had all finished when trial id started.
func (w *experimentWorkflow) stopperHistory(id int) hpo.History {
	h := w.history()
	for k := 0; k <= id-w.parallelism(); k++ {
		h.Trials = append(h.Trials, hpoTrial(w.st.Trials[k]))
	}
	return h
}

func (w *experimentWorkflow) history() hpo.History {
	return hpo.History{Space: w.space, Direction: hpo.Direction(w.exp.Spec.Objective.Direction), Seed: w.st.Seed}
}

func hpoTrial(t *TrialState) hpo.Trial {
	ht := hpo.Trial{ID: t.ID, Params: t.Params, Value: t.Value}
	switch t.Phase {
	case schemas.TrialCompleted:
		ht.State = hpo.TrialCompleted
	case schemas.TrialPruned:
		ht.State = hpo.TrialPruned
	case schemas.TrialFailed:
		ht.State = hpo.TrialFailed
	default:
		ht.State = hpo.TrialRunning
	}
	for _, r := range t.Reports {
		ht.Reports = append(ht.Reports, hpo.Report{Step: r.Step, Value: r.Value})
	}
	return ht
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
		now := workflow.Now(ctx)
		t.Job = TrialJobName(w.exp.Metadata.Name, t.ID, t.Attempt)
		t.Phase, t.StartTime, t.FinishTime = schemas.TrialRunning, &now, nil
		t.Reports, t.Value, t.Step, t.Message = nil, nil, 0, ""
		w.trialEvent(ctx, t)

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
				*run = trialRun{wake: run.wake}
				continue
			}
		}
		w.trialEvent(ctx, t)
		if t.Phase == schemas.TrialCompleted && t.Value != nil && w.exp.Spec.Objective.Reached(*t.Value) {
			w.end(experimentOutcome{schemas.ExperimentSucceeded, "GoalReached", fmt.Sprintf("trial %d reached the goal: %s = %g", t.ID, w.exp.Spec.Objective.Metric, *t.Value)})
		}
		return
	}
}

// runAttempt runs one job of a trial as a child workflow, follows its metric reports
// until it ends, and says how the attempt went.
func (w *experimentWorkflow) runAttempt(ctx workflow.Context, t *TrialState, run *trialRun) (attemptOutcome, string) {
	job, err := w.exp.TrialJob(t.Job, t.ID, hpo.Format(w.space, t.Params))
	if err != nil {
		return attemptFailed, err.Error()
	}
	// The experiment stops its trials itself; a trial whose experiment was terminated
	// runs to its end and cleans up after itself.
	child := TrialJobStart(TrainingJobInput{Job: job, Params: w.paramValues(t.Params)}).ExecuteChild(ctx)
	var exec workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		return attemptFailed, fmt.Sprintf("could not start job %s: %s", t.Job, rootMessage(err))
	}
	run.uid = exec.RunID

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

	metric := w.exp.Spec.Objective.Metric
	switch {
	case run.stop == stopPruned:
		return attemptPruned, run.stopReason
	case childErr != nil:
		return attemptFailed, fmt.Sprintf("job %s: %s", t.Job, rootMessage(childErr))
	case res.Status.Phase == schemas.JobSucceeded && t.Value == nil:
		return attemptFailed, fmt.Sprintf("job %s succeeded without reporting %s", t.Job, metric)
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
		Metric: w.exp.Spec.Objective.Metric, StepMetric: w.exp.Spec.Objective.StepMetric,
		AfterSeq: run.lastSeq, MaxWait: w.opts.MetricsWait, Drain: drain,
	}
}

// numberedReport is a report with its step.
type numberedReport struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
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
		out = append(out, numberedReport{Step: step, Value: r.Value})
	}
	return out
}

// addReports records new reports of a trial in order and applies the early-stopping
// rule at each. Once the rule has fired, later reports are ignored: the trial's value
// is the one it had where it was stopped.
func (w *experimentWorkflow) addReports(ctx workflow.Context, t *TrialState, run *trialRun, got activities.WatchTrialMetricsResult) {
	run.lastSeq = max(run.lastSeq, got.LastSeq)
	reps := run.number(got)
	if run.stop == stopPruned || len(reps) == 0 {
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
	for i, r := range reps {
		t.Reports = withReport(t.Reports, r.Step, r.Value)
		v := r.Value
		t.Value, t.Step = &v, r.Step
		if i == prune {
			w.requestStop(run, stopPruned, fmt.Sprintf("stopped early at step %d by rule %s: %s = %g",
				r.Step, w.exp.Spec.EarlyStopping.Rule, w.exp.Spec.Objective.Metric, v))
			return
		}
	}
}

// firstPrune returns the index of the first of reps at which the early-stopping rule
// stops the trial, or -1. It changes nothing.
func (w *experimentWorkflow) firstPrune(t *TrialState, reps []numberedReport) int {
	sim := *t
	hist := w.stopperHistory(t.ID)
	for i, r := range reps {
		sim.Reports = withReport(sim.Reports, r.Step, r.Value)
		v := r.Value
		sim.Value, sim.Step = &v, r.Step
		if w.stopper.ShouldStop(hist, hpoTrial(&sim)) {
			return i
		}
	}
	return -1
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

// end makes the experiment end with out once its running trials have been stopped.
func (w *experimentWorkflow) end(out experimentOutcome) {
	if w.ending != nil {
		return
	}
	w.ending = &out
	w.stopAll(out.message)
}

func (w *experimentWorkflow) stopAll(reason string) {
	for _, run := range w.runs {
		if run != nil {
			w.requestStop(run, stopExperiment, reason)
		}
	}
	w.changed = true
}

func (w *experimentWorkflow) handleStop(ctx workflow.Context, req StopRequest) (ExperimentUpdateResult, error) {
	if w.st.Phase == schemas.ExperimentRunning && w.ending == nil {
		reason := req.Reason
		if reason == "" {
			reason = "stopped by request"
		}
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentStopping, "StopRequested", reason})
		w.stopAll(reason)
	}
	if err := workflow.Await(ctx, func() bool {
		if w.ending != nil {
			return w.st.Phase.Terminal()
		}
		return w.st.Phase != schemas.ExperimentStopping
	}); err != nil {
		return ExperimentUpdateResult{}, err
	}
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

func (w *experimentWorkflow) handleResume(ctx workflow.Context, req ResumeRequest) (ExperimentUpdateResult, error) {
	if w.st.Phase == schemas.ExperimentStopped || w.st.Phase == schemas.ExperimentStopping {
		msg := req.Reason
		if msg == "" {
			msg = "resumed by request"
		}
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentRunning, "Resumed", msg})
		w.changed = true
	}
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

func (w *experimentWorkflow) handleExtend(ctx workflow.Context, req ExtendRequest) (ExperimentUpdateResult, error) {
	w.st.MaxTrials = req.MaxTrials
	w.changed = true
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

// finishSearch ends an experiment whose trials have all run.
func (w *experimentWorkflow) finishSearch(ctx workflow.Context) (ExperimentResult, error) {
	best, ok := hpo.Best(w.allTrialsHistory())
	if !ok {
		return w.finish(ctx, experimentOutcome{schemas.ExperimentFailed, "NoTrialCompleted", fmt.Sprintf("none of the %d trials completed with a value of %s", len(w.st.Trials), w.exp.Spec.Objective.Metric)})
	}
	reason, msg := "MaxTrialsReached", fmt.Sprintf("%d trials ran", len(w.st.Trials))
	if w.st.Exhausted {
		reason, msg = "SearchSpaceExhausted", fmt.Sprintf("every point of the grid ran (%d trials)", len(w.st.Trials))
	}
	return w.finish(ctx, experimentOutcome{schemas.ExperimentSucceeded, reason, fmt.Sprintf("%s; best: trial %d, %s = %g", msg, best.ID, w.exp.Spec.Objective.Metric, *best.Value)})
}

func (w *experimentWorkflow) allTrialsHistory() hpo.History {
	h := w.history()
	for _, t := range w.st.Trials {
		h.Trials = append(h.Trials, hpoTrial(t))
	}
	return h
}

// finish enters a final phase and waits until every event is published and every
// update handled.
func (w *experimentWorkflow) finish(ctx workflow.Context, out experimentOutcome) (ExperimentResult, error) {
	now := workflow.Now(ctx)
	w.st.FinishTime = &now
	w.setPhase(ctx, out)
	w.drainOutbox(ctx)
	return ExperimentResult{Status: w.status()}, nil
}

func (w *experimentWorkflow) drainOutbox(ctx workflow.Context) {
	w.events.drain(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func (w *experimentWorkflow) shouldContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= w.opts.MaxHistoryEvents
}

// continueAsNew carries the state into a new run; no trial runs at this point.
func (w *experimentWorkflow) continueAsNew(ctx workflow.Context) error {
	w.drainOutbox(ctx)
	return workflow.NewContinueAsNewError(ctx, ExperimentWorkflowName,
		ExperimentInput{Experiment: w.in.Experiment, State: w.st, Options: w.in.Options})
}

func (w *experimentWorkflow) setPhase(ctx workflow.Context, to experimentOutcome) {
	w.st.Phase, w.st.Reason, w.st.Message = to.phase, to.reason, to.message
	w.upsertPhase(ctx)
	w.logger.Info("experiment phase", "phase", to.phase, "reason", to.reason, "message", to.message)
}

func (w *experimentWorkflow) upsertPhase(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(string(w.st.Phase))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}
}

// paramValues are a trial's parameters as the trial job gets them in DLC_PARAMS and
// the API shows them: numbers, a categorical parameter's choice as a number, boolean or
// string.
func (w *experimentWorkflow) paramValues(params map[string]float64) map[string]any {
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

// status is the experiment as the status query and the result report it.
func (w *experimentWorkflow) status() schemas.ExperimentStatus {
	st := schemas.ExperimentStatus{
		Phase: w.st.Phase, Reason: w.st.Reason, Message: w.st.Message, Seed: w.st.Seed,
		MaxTrials: w.st.MaxTrials, Trials: make([]schemas.TrialStatus, 0, len(w.st.Trials)),
		Runs: w.st.Runs, FinishTime: w.st.FinishTime,
	}
	start := w.st.StartTime
	st.StartTime = &start
	for _, t := range w.st.Trials {
		st.Trials = append(st.Trials, schemas.TrialStatus{
			ID: t.ID, Job: t.Job, Attempts: t.Attempt + 1, Phase: t.Phase, Params: w.paramValues(t.Params),
			Value: t.Value, Step: t.Step, Reports: t.Reports, Message: t.Message,
			StartTime: t.StartTime, FinishTime: t.FinishTime,
		})
		switch t.Phase {
		case schemas.TrialRunning:
			st.Running++
		case schemas.TrialCompleted:
			st.Completed++
		case schemas.TrialPruned:
			st.Pruned++
		case schemas.TrialFailed:
			st.Failed++
		}
	}
	if best, ok := hpo.Best(w.allTrialsHistory()); ok {
		id, v := best.ID, *best.Value
		st.BestTrial, st.BestValue = &id, &v
		st.BestParams = w.paramValues(best.Params)
	}
	return st
}

// trialEvent queues an opendlc.experiment.trial.v1 event for a trial's new phase.
func (w *experimentWorkflow) trialEvent(ctx workflow.Context, t *TrialState) {
	ws, name := w.exp.Metadata.Workspace, w.exp.Metadata.Name
	w.st.EventSeq++
	id := fmt.Sprintf("%s:trial:%d", w.st.UID, w.st.EventSeq)
	data := events.TrialData{Experiment: name, UID: w.st.UID, Trial: t.Job, Phase: string(t.Phase),
		Params: w.paramValues(t.Params), Objective: t.Value, EarlyStopped: t.Phase == schemas.TrialPruned}
	ev, err := events.New(id, events.TypeExperimentTrial, ws, ExperimentSource(ws, name), name, workflow.Now(ctx), data)
	if err == nil {
		err = w.events.addEvent(events.ExperimentTrialSubject(ws, name), ev)
	}
	if err != nil {
		w.logger.Error("could not encode trial event", "error", err)
	}
}

// ExperimentSource is the CloudEvents source of an experiment's events.
func ExperimentSource(workspace, name string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/experiments/%s", workspace, name)
}

// searchSpace converts the spec's search space to hpo's.
func searchSpace(ps []schemas.ParameterSpec) hpo.Space {
	space := make(hpo.Space, len(ps))
	for i, p := range ps {
		hp := hpo.Param{Name: p.Name, Type: hpo.ParamType(p.Type), Step: p.Step, Log: p.Log}
		if p.Min != nil {
			hp.Min = *p.Min
		}
		if p.Max != nil {
			hp.Max = *p.Max
		}
		for _, v := range p.Values {
			hp.Values = append(hp.Values, string(v))
		}
		space[i] = hp
	}
	return space
}

func newSampler(a schemas.AlgorithmSpec) (hpo.Sampler, error) {
	var opts []hpo.Option
	if a.Name == schemas.AlgorithmTPE || a.Name == "" {
		if a.StartupTrials != nil {
			opts = append(opts, hpo.TPEStartupTrials(int(*a.StartupTrials)))
		}
		opts = append(opts, hpo.TPEMultivariate(a.Multivariate), hpo.TPEConstantLiar(a.ConstantLiar))
	}
	name := string(a.Name)
	if name == "" {
		name = string(schemas.DefaultAlgorithm)
	}
	return hpo.New(name, opts...)
}

func newStopper(es schemas.EarlyStoppingSpec) (hpo.Stopper, error) {
	var opts []hpo.StopperOption
	switch es.Rule {
	case schemas.EarlyStoppingASHA:
		if es.MinResource > 0 {
			opts = append(opts, hpo.ASHAMinResource(es.MinResource))
		}
		if es.ReductionFactor > 0 {
			opts = append(opts, hpo.ASHAReductionFactor(int(es.ReductionFactor)))
		}
		if es.MaxResource > 0 {
			opts = append(opts, hpo.ASHAMaxResource(es.MaxResource))
		}
	case schemas.EarlyStoppingMedian:
		if es.StartupTrials != nil {
			opts = append(opts, hpo.MedianStartupTrials(int(*es.StartupTrials)))
		}
		if es.WarmupSteps > 0 {
			opts = append(opts, hpo.MedianWarmupSteps(es.WarmupSteps))
		}
	}
	return hpo.NewStopper(string(es.Rule), opts...)
}
