package workflows

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// ScheduleInput starts a Schedule workflow, or continues one after continue-as-new.
type ScheduleInput struct {
	// Schedule is the validated, defaulted document.
	Schedule schemas.Schedule `json:"schedule"`
	// State is the state carried over from the previous run; nil on creation.
	State *ScheduleState `json:"state,omitempty"`
	// MaxHistoryEvents bounds one run's history before it continues as new; default
	// defaultScheduleMaxEvents.
	MaxHistoryEvents int `json:"maxHistoryEvents,omitempty"`
}

// ScheduleState is a schedule's long-lived state, carried across continue-as-new.
type ScheduleState struct {
	// CreateTime is when the schedule was created.
	CreateTime time.Time `json:"createTime"`
	// Cursor is the latest nominal time the schedule has dealt with (fired, skipped,
	// missed or passed while paused); scheduled times after it are still to come. It only
	// moves forward, which is why a scheduled time is never fired twice.
	Cursor time.Time `json:"cursor"`
	// Running are the runs whose jobs have not ended.
	Running []schemas.ScheduleRun `json:"running,omitempty"`
	// Buffered are runs waiting for the running ones to end, oldest first.
	Buffered []schemas.ScheduleRun `json:"buffered,omitempty"`
	// History are the latest runs, oldest first, at most spec.historyLimit.
	History []schemas.ScheduleRun `json:"history,omitempty"`
	// LastCheckpoint is the newest checkpoint a finished run recorded, and
	// LastCheckpointNominal that run's nominal time.
	LastCheckpoint        string    `json:"lastCheckpoint,omitempty"`
	LastCheckpointNominal time.Time `json:"lastCheckpointNominal,omitzero"`
	// LastStart is when the latest run's job was started: data newer than it is new.
	LastStart time.Time `json:"lastStart,omitzero"`
	// Counts count runs by outcome.
	Counts schemas.ScheduleCounts `json:"counts"`
}

// ScheduleView is what the status query returns.
type ScheduleView struct {
	Schedule schemas.Schedule       `json:"schedule"`
	Status   schemas.ScheduleStatus `json:"status"`
}

// ScheduleQuery is the status query's argument.
type ScheduleQuery struct {
	// Next is how many upcoming fire times to list; default 5, at most 100.
	Next int `json:"next,omitempty"`
}

// PauseScheduleRequest pauses a schedule.
type PauseScheduleRequest struct {
	Note string `json:"note,omitempty"`
}

// ResumeScheduleRequest resumes a paused schedule.
type ResumeScheduleRequest struct{}

// TriggerScheduleRequest runs a schedule's action now.
type TriggerScheduleRequest struct {
	// OverlapPolicy overrides the schedule's for this run (allowAll runs it even while
	// another runs).
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// TriggerScheduleResult is the triggered run.
type TriggerScheduleResult struct {
	Run schemas.ScheduleRun `json:"run"`
}

// BackfillScheduleRequest runs every nominal time of [From, To) once.
type BackfillScheduleRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// OverlapPolicy is bufferAll (default: the runs run one after another) or allowAll
	// (all at once).
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// BackfillScheduleResult lists the backfill's runs as they were dealt with.
type BackfillScheduleResult struct {
	Runs []schemas.ScheduleRun `json:"runs"`
}

// UpdateScheduleRequest replaces a schedule's spec.
type UpdateScheduleRequest struct {
	// Schedule is the validated, defaulted document; its name and workspace must not
	// change.
	Schedule schemas.Schedule `json:"schedule"`
}

// Bounds of the Schedule workflow.
const (
	// defaultScheduleMaxEvents bounds one run's history before it continues as new.
	defaultScheduleMaxEvents = 10000
	// maxBackfill bounds the nominal times of one backfill request.
	maxBackfill = 1000
	// maxDueSteps bounds the nominal times examined at one wake-up; more are examined at
	// the next.
	maxDueSteps = 100000
	// maxMissedRecorded bounds the missed runs recorded one by one after one downtime.
	maxMissedRecorded = 100
	// catchupLateness: a run that starts later than this after its fire time is a
	// catch-up run.
	catchupLateness = 10 * time.Second
	// scheduleActivityTimeout bounds the data check.
	scheduleActivityTimeout = 5 * time.Minute
)

// ScheduleWorkflow is one schedule: it sleeps until the next fire time of its cron
// expression, starts the action as a child TrainingJob, Experiment or Pipeline workflow
// with a workflow id derived from the schedule and the nominal time, applies the overlap
// policy against its runs still running, catches up runs missed while the control plane
// was down (within the catch-up window, each once), and answers pause, resume, trigger,
// backfill and spec updates. It continues as new before its history grows large,
// carrying its state.
func ScheduleWorkflow(ctx workflow.Context, in ScheduleInput) error {
	w := &scheduleWorkflow{in: in, logger: workflow.GetLogger(ctx)}
	if err := w.setup(ctx); err != nil {
		return err
	}
	return w.run(ctx)
}

// scheduleWorkflow is the Schedule state machine.
type scheduleWorkflow struct {
	in     ScheduleInput
	logger log.Logger
	spec   schemas.Schedule
	// times are spec's fire times; all are the same without startTime and endTime
	// (backfills ignore them).
	times, all *schedule.Schedule
	specGen    int
	st         ScheduleState

	// wake is set by whatever the main loop should look at: a request, a finished run,
	// a changed spec.
	wake bool
	// requests are triggers and backfills waiting for the main loop, in arrival order.
	requests []*fireRequest
	// stopping holds the runs being stopped (cancelOther), by name.
	stopping map[string]bool
	// due caches the next scheduled time, so a wake-up with nothing due costs nothing.
	due dueCache
}

// fireRequest is a trigger or backfill handed from its update handler to the main loop.
type fireRequest struct {
	nominals []time.Time
	trigger  schemas.RunTrigger
	policy   schedule.OverlapPolicy
	runs     []schemas.ScheduleRun
	done     bool
}

// dueCache remembers the first scheduled time after cursor for spec generation gen.
type dueCache struct {
	valid  bool
	gen    int
	cursor time.Time
	ok     bool
	fire   time.Time
}

// dueTimes is what one wake-up finds due, computed in a side effect so that a replay
// never recomputes fire times (a worker with another time zone database, or a fixed
// cron library, cannot change the past).
type dueTimes struct {
	// Due are nominal times to fire now, in order, with their fire times.
	Due []time.Time `json:"due,omitempty"`
	// Missed counts the nominal times older than the catch-up window; MissedTimes are
	// the latest of them (at most maxMissedRecorded).
	Missed      int64       `json:"missed,omitempty"`
	MissedTimes []time.Time `json:"missedTimes,omitempty"`
	// Examined is the last nominal time examined (due or missed).
	Examined time.Time `json:"examined,omitzero"`
	// Next is the first nominal time not yet due, and NextFire its fire time.
	Next     time.Time `json:"next,omitzero"`
	NextFire time.Time `json:"nextFire,omitzero"`
	HasNext  bool      `json:"hasNext,omitempty"`
}

func (w *scheduleWorkflow) setup(ctx workflow.Context) error {
	if err := w.setSpec(w.in.Schedule); err != nil {
		return temporal.NewNonRetryableApplicationError("invalid schedule: "+err.Error(), activities.ErrTypeInvalidSpec, err)
	}
	if w.in.State != nil {
		w.st = *w.in.State
	} else {
		now := workflow.Now(ctx)
		w.st = ScheduleState{CreateTime: now, Cursor: now}
	}
	w.stopping = map[string]bool{}

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func(q ScheduleQuery) (ScheduleView, error) {
		return w.view(ctx, q.Next), nil
	}); err != nil {
		return err
	}
	if err := w.setUpdateHandlers(ctx); err != nil {
		return err
	}
	// Runs started by an earlier run of this workflow have no child future here: learn
	// their end from Temporal.
	for _, r := range w.st.Running {
		w.followByActivity(ctx, r)
	}
	return nil
}

// setSpec installs a spec and its fire times.
func (w *scheduleWorkflow) setSpec(s schemas.Schedule) error {
	times, err := s.Times()
	if err != nil {
		return err
	}
	unbounded := s
	unbounded.Spec.StartTime, unbounded.Spec.EndTime = nil, nil
	all, err := unbounded.Times()
	if err != nil {
		return err
	}
	w.spec, w.times, w.all = s, times, all
	w.specGen++
	return nil
}

func (w *scheduleWorkflow) setUpdateHandlers(ctx workflow.Context) error {
	pause := func(ctx workflow.Context, req PauseScheduleRequest) (ScheduleView, error) {
		w.setPaused(ctx, true, req.Note)
		return w.view(ctx, 0), nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSchedulePause, pause, workflow.UpdateHandlerOptions{
		Validator: func(req PauseScheduleRequest) error {
			if len(req.Note) > 1024 {
				return errors.New("note: must be at most 1024 characters")
			}
			return nil
		},
	}); err != nil {
		return err
	}
	resume := func(ctx workflow.Context, _ ResumeScheduleRequest) (ScheduleView, error) {
		w.setPaused(ctx, false, "")
		return w.view(ctx, 0), nil
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateScheduleResume, resume); err != nil {
		return err
	}

	trigger := func(ctx workflow.Context, req TriggerScheduleRequest) (TriggerScheduleResult, error) {
		policy := req.OverlapPolicy
		if policy == "" {
			policy = w.spec.Spec.OverlapPolicy
		}
		r := &fireRequest{nominals: []time.Time{workflow.Now(ctx).UTC().Truncate(time.Second)},
			trigger: schemas.TriggerManual, policy: policy}
		if err := w.submit(ctx, r); err != nil {
			return TriggerScheduleResult{}, err
		}
		return TriggerScheduleResult{Run: r.runs[0]}, nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateScheduleTrigger, trigger, workflow.UpdateHandlerOptions{
		Validator: func(req TriggerScheduleRequest) error {
			if !req.OverlapPolicy.Valid() {
				return fmt.Errorf("overlapPolicy: must be one of %v", schedule.OverlapPolicies)
			}
			return nil
		},
	}); err != nil {
		return err
	}

	backfill := func(ctx workflow.Context, req BackfillScheduleRequest) (BackfillScheduleResult, error) {
		policy := req.OverlapPolicy
		if policy == "" {
			policy = schedule.BufferAll
		}
		var times []time.Time
		if err := workflow.SideEffect(ctx, func(workflow.Context) any {
			t, _ := w.all.FireTimesBetween(req.From, req.To, maxBackfill)
			return t
		}).Get(&times); err != nil {
			return BackfillScheduleResult{}, err
		}
		r := &fireRequest{nominals: times, trigger: schemas.TriggerBackfill, policy: policy}
		if err := w.submit(ctx, r); err != nil {
			return BackfillScheduleResult{}, err
		}
		return BackfillScheduleResult{Runs: r.runs}, nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateScheduleBackfill, backfill, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, req BackfillScheduleRequest) error {
			switch {
			case req.From.IsZero() || req.To.IsZero():
				return errors.New("from and to: both are required")
			case !req.From.Before(req.To):
				return errors.New("from: must be before to")
			case req.To.After(workflow.Now(ctx).Add(time.Second)):
				return errors.New("to: must not be in the future; future times run on schedule")
			case req.OverlapPolicy != "" && req.OverlapPolicy != schedule.BufferAll && req.OverlapPolicy != schedule.AllowAll:
				return errors.New("overlapPolicy: must be bufferAll (one after another) or allowAll (all at once)")
			}
			times, truncated := w.all.FireTimesBetween(req.From, req.To, maxBackfill)
			if truncated {
				return fmt.Errorf("the range holds more than %d fire times; backfill it in parts", maxBackfill)
			}
			if len(times)+len(w.st.Buffered) > schedule.MaxBuffered {
				return fmt.Errorf("%d runs already wait; a backfill of %d would pass the limit of %d", len(w.st.Buffered), len(times), schedule.MaxBuffered)
			}
			return nil
		},
	}); err != nil {
		return err
	}

	update := func(ctx workflow.Context, req UpdateScheduleRequest) (ScheduleView, error) {
		wasPaused := w.spec.Spec.Paused
		if err := w.setSpec(req.Schedule); err != nil {
			return ScheduleView{}, err
		}
		w.trimHistory()
		if wasPaused && !w.spec.Spec.Paused {
			w.skipPausedTimes(ctx)
		}
		w.publishAttributes(ctx)
		w.wake = true
		return w.view(ctx, 0), nil
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateScheduleSpec, update, workflow.UpdateHandlerOptions{
		Validator: func(req UpdateScheduleRequest) error {
			m := req.Schedule.Metadata
			if m.Name != w.spec.Metadata.Name || m.Workspace != w.spec.Metadata.Workspace {
				return fmt.Errorf("metadata: the name and workspace of a schedule cannot change (%s/%s)",
					w.spec.Metadata.Workspace, w.spec.Metadata.Name)
			}
			if errs := req.Schedule.Validate(); len(errs) > 0 {
				return errs
			}
			return nil
		},
	})
}

// submit hands a request to the main loop and waits until it is dealt with.
func (w *scheduleWorkflow) submit(ctx workflow.Context, r *fireRequest) error {
	w.requests = append(w.requests, r)
	w.wake = true
	return workflow.Await(ctx, func() bool { return r.done })
}

// setPaused pauses or resumes scheduled runs. Times that pass while paused are not
// caught up.
func (w *scheduleWorkflow) setPaused(ctx workflow.Context, paused bool, note string) {
	was := w.spec.Spec.Paused
	w.spec.Spec.Paused, w.spec.Spec.PauseNote = paused, note
	if was && !paused {
		w.skipPausedTimes(ctx)
	}
	w.publishAttributes(ctx)
	w.wake = true
}

// skipPausedTimes moves the cursor past the times that passed while paused.
func (w *scheduleWorkflow) skipPausedTimes(ctx workflow.Context) {
	if now := workflow.Now(ctx); now.After(w.st.Cursor) {
		w.st.Cursor = now
	}
}

// publishAttributes records the pause state, the labels and the cron expression where
// the list call reads them.
func (w *scheduleWorkflow) publishAttributes(ctx workflow.Context) {
	phase := SchedulePhaseActive
	if w.spec.Spec.Paused {
		phase = SchedulePhasePaused
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(phase),
		LabelsKey.ValueSet(LabelKeywords(w.spec.Metadata.Labels))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoCron: w.spec.Spec.Cron, MemoTimeZone: w.spec.Spec.TimeZone}); err != nil {
		w.logger.Warn("upsert memo failed", "error", err)
	}
}

func (w *scheduleWorkflow) run(ctx workflow.Context) error {
	for {
		w.wake = false
		w.processRequests(ctx)
		fire, ok := w.processDue(ctx)
		w.startBuffered(ctx)
		if w.wake {
			continue // something changed while firing; look again before sleeping
		}
		if w.shouldContinueAsNew(ctx) {
			return workflow.NewContinueAsNewError(ctx, ScheduleWorkflowName, ScheduleInput{
				Schedule: w.spec, State: &w.st, MaxHistoryEvents: w.in.MaxHistoryEvents,
			})
		}
		awake := func() bool { return w.wake }
		if !ok {
			if err := workflow.Await(ctx, awake); err != nil {
				return err
			}
			continue
		}
		if d := fire.Sub(workflow.Now(ctx)); d > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, d, awake); err != nil {
				return err
			}
		}
	}
}

// processRequests fires the triggers and backfills in arrival order.
func (w *scheduleWorkflow) processRequests(ctx workflow.Context) {
	for len(w.requests) > 0 {
		r := w.requests[0]
		w.requests = w.requests[1:]
		for _, n := range r.nominals {
			r.runs = append(r.runs, w.fire(ctx, n, r.trigger, r.policy))
		}
		r.done = true
	}
}

// processDue fires every scheduled time whose fire time has come, records those older
// than the catch-up window as missed, and returns the next fire time (false when there
// is none, or while paused).
func (w *scheduleWorkflow) processDue(ctx workflow.Context) (time.Time, bool) {
	if w.spec.Spec.Paused {
		return time.Time{}, false
	}
	now := workflow.Now(ctx)
	c := w.due
	if c.valid && c.gen == w.specGen && c.cursor.Equal(w.st.Cursor) && (!c.ok || c.fire.After(now)) {
		return c.fire, c.ok
	}
	var d dueTimes
	cursor, window, times := w.st.Cursor, w.spec.Spec.CatchupWindow.D(), w.times
	if err := workflow.SideEffect(ctx, func(workflow.Context) any {
		return findDue(times, cursor, now, window)
	}).Get(&d); err != nil {
		w.logger.Error("compute fire times", "error", err)
		return time.Time{}, false
	}

	if d.Missed > 0 {
		w.recordMissed(ctx, d)
		w.st.Cursor = d.MissedTimes[len(d.MissedTimes)-1]
	}
	for _, nominal := range d.Due {
		w.st.Cursor = nominal
		trigger := schemas.TriggerSchedule
		if now.Sub(w.times.FireTime(nominal)) > catchupLateness {
			trigger = schemas.TriggerCatchup
		}
		w.fire(ctx, nominal, trigger, w.spec.Spec.OverlapPolicy)
	}
	if !d.Examined.IsZero() && d.Examined.After(w.st.Cursor) {
		w.st.Cursor = d.Examined
	}
	w.due = dueCache{valid: true, gen: w.specGen, cursor: w.st.Cursor, ok: d.HasNext, fire: d.NextFire}
	return d.NextFire, d.HasNext
}

// findDue walks the nominal times after cursor whose fire time is not after now: those
// older than the catch-up window are missed, the others due. It is pure.
func findDue(times *schedule.Schedule, cursor, now time.Time, window time.Duration) dueTimes {
	var d dueTimes
	t := cursor
	for range maxDueSteps {
		next, ok := times.NextAfter(t)
		if !ok {
			return d
		}
		fire := times.FireTime(next)
		if fire.After(now) {
			d.Next, d.NextFire, d.HasNext = next, fire, true
			return d
		}
		if now.Sub(fire) > window {
			d.Missed++
			d.MissedTimes = append(d.MissedTimes, next)
			if len(d.MissedTimes) > maxMissedRecorded {
				d.MissedTimes = d.MissedTimes[1:]
			}
		} else {
			d.Due = append(d.Due, next)
		}
		d.Examined = next
		t = next
	}
	// More to examine: the caller looks again at once.
	d.Next, d.NextFire, d.HasNext = d.Examined, d.Examined, true
	return d
}

// recordMissed records the times missed while the control plane was down.
func (w *scheduleWorkflow) recordMissed(ctx workflow.Context, d dueTimes) {
	now := workflow.Now(ctx)
	msg := fmt.Sprintf("the control plane was down at this time for longer than the catch-up window (%s)", w.spec.Spec.CatchupWindow.D())
	for i, t := range d.MissedTimes {
		m := msg
		if i == 0 && d.Missed > int64(len(d.MissedTimes)) {
			m += fmt.Sprintf("; %d earlier times were missed too", d.Missed-int64(len(d.MissedTimes)))
		}
		w.addHistory(schemas.ScheduleRun{NominalTime: t, Trigger: schemas.TriggerSchedule, Kind: w.spec.Spec.Action.Kind(),
			Outcome: schemas.RunMissed, Message: m, FinishTime: &now})
	}
	w.st.Counts.Missed += d.Missed
}

// fire deals with one nominal time: the overlap policy decides whether it starts now,
// waits or is skipped. A time already fired by this schedule is not fired again.
func (w *scheduleWorkflow) fire(ctx workflow.Context, nominal time.Time, trigger schemas.RunTrigger, policy schedule.OverlapPolicy) schemas.ScheduleRun {
	run := schemas.ScheduleRun{NominalTime: nominal.UTC(), Trigger: trigger, Kind: w.spec.Spec.Action.Kind(),
		Job: ScheduledJobName(w.spec.Metadata.Name, nominal)}
	if prev, ok := w.known(run.Job); ok {
		return prev
	}
	d := schedule.Decide(policy, len(w.st.Running), len(w.st.Buffered))
	switch d.Action {
	case schedule.ActionSkip:
		return w.skip(ctx, run, fmt.Sprintf("%d earlier run(s) still running (overlap policy %s)", len(w.st.Running), policy))
	case schedule.ActionBuffer:
		if d.DropBuffered {
			for _, b := range w.st.Buffered {
				w.skip(ctx, b, "superseded by the run of "+nominal.UTC().Format(time.RFC3339)+" (overlap policy cancelOther)")
			}
			w.st.Buffered = nil
		}
		if d.CancelRunning {
			w.stopRunning(ctx, "superseded by the run of "+nominal.UTC().Format(time.RFC3339)+" (overlap policy cancelOther)")
		}
		run.Outcome = schemas.RunBuffered
		w.st.Buffered = append(w.st.Buffered, run)
		return run
	}
	return w.start(ctx, run)
}

// known returns the run of a job this schedule already started or queued.
func (w *scheduleWorkflow) known(job string) (schemas.ScheduleRun, bool) {
	for _, list := range [][]schemas.ScheduleRun{w.st.Running, w.st.Buffered, w.st.History} {
		for _, r := range list {
			if r.Job == job { // runs that started no job have none
				return r, true
			}
		}
	}
	return schemas.ScheduleRun{}, false
}

// skip records a run that does not start.
func (w *scheduleWorkflow) skip(ctx workflow.Context, run schemas.ScheduleRun, msg string) schemas.ScheduleRun {
	now := workflow.Now(ctx)
	run.Job, run.Outcome, run.Message, run.FinishTime = "", schemas.RunSkipped, msg, &now
	w.st.Counts.Skipped++
	w.addHistory(run)
	return run
}

// start starts a run's job as a child workflow whose id is derived from the schedule
// and the nominal time, so that no retry, replay or second request ever starts a second
// job for the same time: Temporal refuses a second execution with that id, and the
// refusal means "already fired".
func (w *scheduleWorkflow) start(ctx workflow.Context, run schemas.ScheduleRun) schemas.ScheduleRun {
	opts := w.spec.Spec.RunOptions
	if uri := opts.SkipIfNoNewDataUnder; uri != "" && !w.st.LastStart.IsZero() &&
		(run.Trigger == schemas.TriggerSchedule || run.Trigger == schemas.TriggerCatchup) {
		res, err := checkNewData(ctx, activities.CheckNewDataInput{URI: uri, Since: w.st.LastStart})
		now := workflow.Now(ctx)
		if err != nil {
			run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
			run.Message = "could not check for new data: " + rootMessage(err)
			w.addHistory(run)
			return run
		}
		if !res.Found {
			run.Job, run.Outcome, run.FinishTime = "", schemas.RunNoNewData, &now
			run.Message = fmt.Sprintf("nothing under %s was modified since the previous run started (%s)",
				uri, w.st.LastStart.UTC().Format(time.RFC3339))
			w.st.Counts.NoNewData++
			w.addHistory(run)
			return run
		}
	}

	// What runs is what the spec says now: a buffered run may have waited across an
	// update of the spec.
	run.Kind = w.spec.Spec.Action.Kind()
	var c runChild
	switch run.Kind {
	case schemas.KindExperiment, schemas.KindPipeline:
		now := workflow.Now(ctx)
		var err error
		if run.Kind == schemas.KindExperiment {
			c = w.experimentChild(run)
		} else if c, err = w.pipelineChild(run); err != nil {
			run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
			run.Message = "could not start the pipeline: " + err.Error()
			w.addHistory(run)
			return run
		}
	default:
		c = w.jobChild(&run)
	}
	noun := kindNoun(run.Kind)
	child := c.start.ExecuteChild(ctx)
	err := child.GetChildWorkflowExecution().Get(ctx, nil)
	now := workflow.Now(ctx)
	switch {
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		// This time was fired before, by a run of the schedule whose record is gone (or the
		// name was taken by hand). Never start a second one: follow the existing one.
		run.Outcome = schemas.RunRunning
		run.ResumedFrom = ""
		run.Message = "already fired: a " + noun + " with this name exists, so no second one was started"
		w.st.Running = append(w.st.Running, run)
		w.addHistory(run)
		w.followByActivity(ctx, run)
		return run
	case err != nil:
		run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
		run.Message = "could not start the " + noun + ": " + rootMessage(err)
		w.addHistory(run)
		return run
	}
	run.StartTime, run.Outcome = &now, schemas.RunRunning
	w.st.LastStart = now
	w.st.Counts.Started++
	w.st.Running = append(w.st.Running, run)
	w.addHistory(run)
	workflow.Go(ctx, func(ctx workflow.Context) {
		w.finished(ctx, run.Job, c.outcome(ctx, child))
	})
	return run
}

// runChild is the child workflow a run starts: how it is started, and how its result
// reads as the run's outcome.
type runChild struct {
	// start is how the child is started (workflows/start.go).
	start StartSpec
	// outcome waits for the child's result.
	outcome func(workflow.Context, workflow.Future) activities.JobOutcome
}

// kindNoun names what a run of kind k starts, in messages.
func kindNoun(k schemas.Kind) string {
	switch k {
	case schemas.KindExperiment:
		return "experiment"
	case schemas.KindPipeline:
		return "pipeline"
	}
	return "job"
}

// runWorkflowID is the workflow id of what a run started.
func runWorkflowID(workspace string, run schemas.ScheduleRun) string {
	switch run.Kind {
	case schemas.KindExperiment:
		return ExperimentWorkflowID(workspace, run.Job)
	case schemas.KindPipeline:
		return PipelineWorkflowID(workspace, run.Job)
	}
	return JobWorkflowID(workspace, run.Job)
}

// jobChild is a run's TrainingJob; it records the checkpoint the job resumes from.
func (w *scheduleWorkflow) jobChild(run *schemas.ScheduleRun) runChild {
	job := w.jobFor(*run)
	if ck := job.Spec.Checkpoint; ck != nil {
		run.ResumedFrom = ck.ResumeFrom
	}
	return runChild{
		start: JobStart(TrainingJobInput{Job: job}),
		outcome: func(ctx workflow.Context, f workflow.Future) activities.JobOutcome {
			var res TrainingJobResult
			if err := f.Get(ctx, &res); err != nil {
				return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: rootMessage(err)}
			}
			return activities.JobOutcome{Found: true, Phase: res.Status.Phase, LastCheckpoint: res.Status.LastCheckpoint, Message: res.Status.Message}
		},
	}
}

// experimentChild is a run's Experiment, started as the API starts one.
func (w *scheduleWorkflow) experimentChild(run schemas.ScheduleRun) runChild {
	t := w.spec.Spec.Action.ExperimentTemplate
	exp := schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       t.Spec,
	}
	return runChild{
		start: ExperimentStart(ExperimentInput{Experiment: exp}),
		outcome: func(ctx workflow.Context, f workflow.Future) activities.JobOutcome {
			var res ExperimentResult
			if err := f.Get(ctx, &res); err != nil {
				return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: rootMessage(err)}
			}
			return activities.JobOutcome{Found: true, Phase: schemas.JobPhase(res.Status.Phase), Message: res.Status.Message}
		},
	}
}

// pipelineChild is a run's Pipeline, started as the API starts one, with the
// template's parameters.
func (w *scheduleWorkflow) pipelineChild(run schemas.ScheduleRun) (runChild, error) {
	t := w.spec.Spec.Action.PipelineTemplate
	p := schemas.Pipeline{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindPipeline,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       t.Spec,
	}
	params, errs := p.Spec.ResolveParams(t.Params)
	if len(errs) > 0 {
		return runChild{}, errs
	}
	return runChild{
		start: PipelineStart(PipelineInput{Pipeline: p, Params: params}),
		outcome: func(ctx workflow.Context, f workflow.Future) activities.JobOutcome {
			var res PipelineResult
			if err := f.Get(ctx, &res); err != nil {
				return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: rootMessage(err)}
			}
			return activities.JobOutcome{Found: true, Phase: schemas.JobPhase(res.Status.Phase), Message: res.Status.Message}
		},
	}, nil
}

// runMeta is the metadata of what a run starts: its name, the schedule's workspace, the
// template's labels plus the schedule's, its annotations plus the nominal time and the
// trigger.
func (w *scheduleWorkflow) runMeta(run schemas.ScheduleRun, t schemas.TemplateMeta) schemas.ObjectMeta {
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[schemas.LabelSchedule] = w.spec.Metadata.Name
	annotations := maps.Clone(t.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[schemas.AnnotationNominalTime] = run.NominalTime.UTC().Format(time.RFC3339)
	annotations[schemas.AnnotationRunTrigger] = string(run.Trigger)
	return schemas.ObjectMeta{Name: run.Job, Workspace: w.spec.Metadata.Workspace, Labels: labels, Annotations: annotations}
}

// jobFor builds the job of a run from the template: its name, the schedule's label,
// the nominal time, and the checkpoint to resume from.
func (w *scheduleWorkflow) jobFor(run schemas.ScheduleRun) schemas.TrainingJob {
	t := w.spec.Spec.Action.JobTemplate
	spec := t.Spec
	if spec.Checkpoint != nil {
		ck := *spec.Checkpoint
		if w.spec.Spec.RunOptions.ResumeFromPreviousCheckpoint && w.st.LastCheckpoint != "" {
			ck.ResumeFrom = w.st.LastCheckpoint
		}
		spec.Checkpoint = &ck
	}
	return schemas.TrainingJob{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindTrainingJob,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       spec,
	}
}

// followByActivity learns how a run this workflow holds no child future for ends.
func (w *scheduleWorkflow) followByActivity(ctx workflow.Context, run schemas.ScheduleRun) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		out, err := waitScheduledJob(ctx, activities.WaitScheduledJobInput{WorkflowID: runWorkflowID(w.spec.Metadata.Workspace, run)})
		if err != nil {
			out = activities.JobOutcome{Found: true, Phase: schemas.JobFailed,
				Message: "could not follow the " + kindNoun(run.Kind) + ": " + rootMessage(err)}
		}
		w.finished(ctx, run.Job, out)
	})
}

// finished records the end of a running run.
func (w *scheduleWorkflow) finished(ctx workflow.Context, job string, out activities.JobOutcome) {
	i := -1
	for j, r := range w.st.Running {
		if r.Job == job {
			i = j
			break
		}
	}
	if i < 0 {
		return
	}
	run := w.st.Running[i]
	w.st.Running = append(w.st.Running[:i:i], w.st.Running[i+1:]...)
	delete(w.stopping, job)
	now := workflow.Now(ctx)
	run.FinishTime = &now
	switch {
	case !out.Found:
		run.Outcome, run.Message = schemas.RunUnknown, "the "+kindNoun(run.Kind)+" no longer exists (deleted before its end was learnt)"
	case out.Phase == schemas.JobSucceeded:
		run.Outcome = schemas.RunSucceeded
	case out.Phase == schemas.JobStopped:
		run.Outcome = schemas.RunStopped
	default:
		run.Outcome = schemas.RunFailed
	}
	if out.Message != "" {
		run.Message = out.Message
	}
	run.Checkpoint = out.LastCheckpoint
	if run.Checkpoint != "" && !run.NominalTime.Before(w.st.LastCheckpointNominal) {
		w.st.LastCheckpoint, w.st.LastCheckpointNominal = run.Checkpoint, run.NominalTime
	}
	w.addHistory(run)
	w.wake = true
}

// stopRunning stops every running run (cancelOther) through its stop update; each
// one's end arrives as usual. A stopped experiment does not end (it waits for a resume),
// so for an experiment the answer Stopped is the run's end.
func (w *scheduleWorkflow) stopRunning(ctx workflow.Context, reason string) {
	for _, r := range w.st.Running {
		if w.stopping[r.Job] {
			continue
		}
		w.stopping[r.Job] = true
		id := runWorkflowID(w.spec.Metadata.Workspace, r)
		workflow.Go(ctx, func(ctx workflow.Context) {
			res, err := stopScheduledJob(ctx, activities.StopScheduledJobInput{WorkflowID: id, Reason: reason})
			if err != nil {
				w.logger.Error("stop scheduled run failed", "workflowId", id, "error", err)
				return
			}
			if r.Kind == schemas.KindExperiment && res.Phase == string(schemas.ExperimentStopped) {
				w.finished(ctx, r.Job, activities.JobOutcome{Found: true, Phase: schemas.JobStopped, Message: reason})
			}
		})
	}
}

// startBuffered starts waiting runs, oldest first, while no run is running.
func (w *scheduleWorkflow) startBuffered(ctx workflow.Context) {
	for len(w.st.Buffered) > 0 && schedule.StartBuffered(len(w.st.Running)) {
		run := w.st.Buffered[0]
		w.st.Buffered = w.st.Buffered[1:]
		run.Outcome = ""
		w.start(ctx, run)
	}
}

// addHistory records a run, replacing the entry of the same job (or, for runs without
// a job, the same nominal time and trigger), and keeps the history bounded.
func (w *scheduleWorkflow) addHistory(run schemas.ScheduleRun) {
	for i := len(w.st.History) - 1; i >= 0; i-- {
		h := w.st.History[i]
		if (run.Job != "" && h.Job == run.Job) || (run.Job == "" && h.Job == "" && h.NominalTime.Equal(run.NominalTime) && h.Trigger == run.Trigger && h.Outcome == run.Outcome) {
			w.st.History[i] = run
			return
		}
	}
	w.st.History = append(w.st.History, run)
	w.trimHistory()
}

func (w *scheduleWorkflow) trimHistory() {
	if n := int(w.spec.Spec.HistoryLimit); n > 0 && len(w.st.History) > n {
		w.st.History = append([]schemas.ScheduleRun(nil), w.st.History[len(w.st.History)-n:]...)
	}
}

// shouldContinueAsNew reports whether to continue as new now: the history is large and
// nothing is half done (no request, no stop in flight, no update handler running).
func (w *scheduleWorkflow) shouldContinueAsNew(ctx workflow.Context) bool {
	if len(w.requests) > 0 || len(w.stopping) > 0 || !workflow.AllHandlersFinished(ctx) {
		return false
	}
	info := workflow.GetInfo(ctx)
	limit := w.in.MaxHistoryEvents
	if limit <= 0 {
		limit = defaultScheduleMaxEvents
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit
}

// view is the status query's answer.
func (w *scheduleWorkflow) view(_ workflow.Context, n int) ScheduleView {
	if n <= 0 {
		n = 5
	}
	n = min(n, 100)
	st := schemas.ScheduleStatus{
		Paused:         w.spec.Spec.Paused,
		PauseNote:      w.spec.Spec.PauseNote,
		CreateTime:     w.st.CreateTime,
		Running:        w.st.Running,
		Buffered:       w.st.Buffered,
		History:        w.st.History,
		LastCheckpoint: w.st.LastCheckpoint,
		Counts:         w.st.Counts,
	}
	if !w.spec.Spec.Paused {
		// Every time up to the cursor has been dealt with; later ones are to come.
		for _, t := range w.times.Next(w.st.Cursor, n) {
			st.Next = append(st.Next, schemas.ScheduledTime{NominalTime: t, FireTime: w.times.FireTime(t)})
		}
	}
	return ScheduleView{Schedule: w.spec, Status: st}
}
