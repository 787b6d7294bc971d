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
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// An Experiment is one workflow (id ExperimentWorkflowID) that holds the search: the
// spec, the seed and every trial with its parameters, reports and outcome. Trials run
// as child TrainingJob workflows, parallelism at a time. The design choices that make
// it reproducible and crash-safe (see docs/experiments.md):
//
//   - Suggestions are made in workflow code by the pure samplers of package hpo, inside
//     workflow.SideEffect. A trial starts as soon as one of the parallelism slots frees,
//     and the sampler sees every trial known at that moment (experiment_slots.go); the
//     recorded answers make a replayed or recovered run rebuild the same trials.
//   - Early stopping compares a trial with every other trial's reports as they are at
//     each of its reports, also recorded, and a trial is Pruned at the step where the
//     rule fired, whatever it reported after.
//   - Metric reports are read back from the trial job's metric subject in JetStream by
//     the WatchTrialMetrics activity, from a stream sequence the workflow remembers; the
//     activity's result is in history, so a retried or replayed read neither loses nor
//     repeats a report. After a trial's job ends, one more read drains what is left.
//   - Before its history grows large the experiment starts no more trials and continues
//     as new with its state, carrying the running trials' handles; the next run follows
//     their jobs (experiment_continue.go).

// ExperimentInput starts (or continues) an Experiment workflow.
type ExperimentInput struct {
	// Experiment is the validated, defaulted spec.
	Experiment schemas.Experiment `json:"experiment"`
	// State is the experiment's state carried across continue-as-new; nil at first.
	State *ExperimentState `json:"state,omitempty"`
	// Options tune the workflow; the zero value is right outside tests.
	Options ExperimentOptions `json:"options,omitzero"`
	// Parent is the uid of the pipeline run that started the experiment (a step); its
	// run record names it.
	Parent string `json:"parent,omitempty"`
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
	// Queue holds the enqueued parameter sets not yet run (experiment_enqueue.go).
	Queue []QueuedTrial `json:"queue,omitempty"`
	// Warm is what spec.warmStart read when the experiment started
	// (experiment_warmstart.go); nil until then.
	Warm *WarmStartState `json:"warm,omitempty"`
	// PBT is algorithm pbt's population state.
	PBT *pbtState `json:"pbt,omitempty"`
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
	Attempt  int                   `json:"attempt"`
	Failures int                   `json:"failures,omitempty"`
	Reports  []schemas.TrialReport `json:"reports,omitempty"`
	Value    *float64              `json:"value,omitempty"`
	// Values are, with several objectives, each objective metric's latest value.
	Values map[string]float64 `json:"values,omitempty"`
	// Aggs are, with spec.objective.aggregate other than last or a weighted objective,
	// what the value is made of (experiment_aggregate.go); reset for a retried trial.
	Aggs       []metricAgg `json:"aggs,omitempty"`
	Step       int64       `json:"step,omitempty"`
	Message    string      `json:"message,omitempty"`
	StartTime  *time.Time  `json:"startTime,omitempty"`
	FinishTime *time.Time  `json:"finishTime,omitempty"`
	// PBT is the trial's lineage with algorithm pbt.
	PBT *pbtLineage `json:"pbt,omitempty"`
	// Enqueued is set on a trial whose parameters were enqueued rather than suggested.
	Enqueued bool `json:"enqueued,omitempty"`
	// EventSeq numbers the trial's events (events.TrialData.Seq) across runs.
	EventSeq int `json:"eventSeq,omitempty"`
	// Run is set on a Running trial carried across continue-as-new: how the next run
	// follows its job (experiment_continue.go).
	Run *CarriedRun `json:"run,omitempty"`
}

// ExperimentResult is the experiment's final status.
type ExperimentResult struct {
	Status schemas.ExperimentStatus `json:"status"`
}

// experimentOutcome is the phase an experiment moves to, or ends in once its running
// trials have stopped.
type experimentOutcome = outcome[schemas.ExperimentPhase]

// ExperimentWorkflow runs a hyper-parameter search: it suggests trials, runs each as a
// child TrainingJob, reads their objective from their metric reports, stops the losing
// ones early, and records the best. Updates: stop, resume, extend, enqueue; query: status.
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

	runs    []*trialRun // by trial ID; nil when the trial does not run
	running int
	// continuing is set once the history is large: no new trials, and continue-as-new
	// as soon as the running trials can be carried (experiment_continue.go).
	continuing bool
	changed    bool
	ending     *experimentOutcome

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
	} else if w.sampler, err = newSampler(&w.exp.Spec); err != nil {
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
		workflow.UpdateHandlerOptions{Validator: validateStop}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume, w.handleResume,
		workflow.UpdateHandlerOptions{Validator: func(ResumeRequest) error {
			if w.st.Phase.Terminal() || w.ending != nil {
				return fmt.Errorf("the experiment has ended (%s)", w.st.Phase)
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateEnqueue, w.handleEnqueue,
		workflow.UpdateHandlerOptions{Validator: w.validateEnqueue}); err != nil {
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
	if w.st.Phase == schemas.ExperimentPending {
		w.experimentPendingEvent(ctx)
	}
	if w.configErr != nil {
		return w.finish(ctx, experimentOutcome{schemas.ExperimentFailed, ReasonInvalidSpec, w.configErr.Error()})
	}
	if w.st.Phase == schemas.ExperimentPending {
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentRunning, ReasonStarted, fmt.Sprintf("searching with %s, %d trial(s) at a time", w.exp.Spec.Algorithm.Name, w.parallelism())})
	} else {
		w.upsertPhase(ctx)
	}
	w.followCarried(ctx)
	w.readWarmStart(ctx)
	for {
		w.changed = false
		if w.st.Phase == schemas.ExperimentRunning && w.ending == nil {
			w.checkFailures(ctx)
		}
		if w.st.Phase == schemas.ExperimentRunning && w.ending == nil && !w.continuing {
			if w.isPBT() {
				w.startPBTTrials(ctx)
			} else {
				w.startTrials(ctx)
			}
		}
		if w.running == 0 {
			switch {
			case w.ending != nil:
				return w.finish(ctx, *w.ending)
			case w.st.Phase == schemas.ExperimentStopping:
				w.setPhase(ctx, experimentOutcome{schemas.ExperimentStopped, w.st.Reason, w.st.Message})
			case w.st.Phase == schemas.ExperimentRunning && w.allDone():
				return w.finishSearch(ctx)
			}
		}
		if w.continuing && w.st.Phase == schemas.ExperimentRunning && w.ending == nil && w.carriable() {
			if err := w.continueCarrying(ctx); err != nil {
				return ExperimentResult{}, err
			}
			continue
		}
		if w.st.Phase == schemas.ExperimentStopped {
			ok, err := workflow.AwaitWithTimeout(ctx, w.opts.ResumeWindow, func() bool { return w.changed })
			if err != nil {
				return ExperimentResult{}, err
			}
			if !ok {
				return w.finish(ctx, experimentOutcome{schemas.ExperimentStopped, ReasonNotResumed, fmt.Sprintf("not resumed within %s of being stopped", w.opts.ResumeWindow)})
			}
			continue
		}
		if err := workflow.Await(ctx, func() bool { return w.changed }); err != nil {
			return ExperimentResult{}, err
		}
		if !w.continuing && w.shouldContinueAsNew(ctx) {
			w.continuing = true
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
func (w *experimentWorkflow) checkFailures(_ workflow.Context) {
	failed := 0
	for _, t := range w.st.Trials {
		if t.Phase == schemas.TrialFailed {
			failed++
		}
	}
	if failed > w.maxFailed() {
		w.end(experimentOutcome{schemas.ExperimentFailed, ReasonTooManyFailedTrials, fmt.Sprintf("%d trials failed; spec.maxFailedTrials is %d", failed, w.maxFailed())})
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

// end makes the experiment end with out once its running trials have been stopped.
func (w *experimentWorkflow) end(out experimentOutcome) {
	if w.ending != nil {
		return
	}
	w.ending = &out
	w.stopAll(out.message)
}

// finishSearch ends an experiment whose trials have all run.
func (w *experimentWorkflow) finishSearch(ctx workflow.Context) (ExperimentResult, error) {
	if w.exp.Spec.MultiObjective() {
		return w.finishMultiObjective(ctx)
	}
	best, ok := hpo.Best(w.allTrialsHistory())
	if !ok {
		return w.finish(ctx, experimentOutcome{schemas.ExperimentFailed, ReasonNoTrialCompleted, fmt.Sprintf("none of the %d trials completed with a value of %s", len(w.st.Trials), w.exp.Spec.PrimaryObjective().Metric)})
	}
	reason, msg := ReasonMaxTrialsReached, fmt.Sprintf("%d trials ran", len(w.st.Trials))
	if w.st.Exhausted {
		reason, msg = ReasonSearchSpaceExhausted, fmt.Sprintf("every point of the grid ran (%d trials)", len(w.st.Trials))
	}
	return w.finish(ctx, experimentOutcome{schemas.ExperimentSucceeded, reason, fmt.Sprintf("%s; best: trial %d, %s = %g", msg, best.ID, w.exp.Spec.PrimaryObjective().Metric, *best.Value)})
}

// finish enters a final phase and waits until every event is published and every
// update handled.
func (w *experimentWorkflow) finish(ctx workflow.Context, out experimentOutcome) (ExperimentResult, error) {
	now := workflow.Now(ctx)
	w.st.FinishTime = &now
	w.setPhase(ctx, out)
	st := w.status()
	recordRun(ctx, w.logger, activities.RecordRunInput{UID: w.st.UID, Parent: w.in.Parent, Experiment: w.exp, ExperimentStatus: &st})
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
