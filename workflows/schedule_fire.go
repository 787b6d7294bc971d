package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// Firing of the Schedule workflow: finding the nominal times that are due or missed,
// handling triggers and backfills, applying the overlap policy, and starting runs.

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
		w.addHistory(ctx, schemas.ScheduleRun{NominalTime: t, Trigger: schemas.TriggerSchedule, Kind: w.spec.Spec.Action.Kind(),
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
		w.runEvent(ctx, run)
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
	w.addHistory(ctx, run)
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
			w.addHistory(ctx, run)
			return run
		}
		if !res.Found {
			run.Job, run.Outcome, run.FinishTime = "", schemas.RunNoNewData, &now
			run.Message = fmt.Sprintf("nothing under %s was modified since the previous run started (%s)",
				uri, w.st.LastStart.UTC().Format(time.RFC3339))
			w.st.Counts.NoNewData++
			w.addHistory(ctx, run)
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
		} else if ref := w.spec.Spec.Action.PipelineTemplateRef; ref != nil {
			var problem string
			if c, problem = w.pipelineRefChild(ctx, run, ref); problem != "" {
				now = workflow.Now(ctx)
				run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
				run.Message = "could not start the pipeline: " + problem
				w.addHistory(ctx, run)
				return run
			}
		} else if c, err = w.pipelineChild(run); err != nil {
			run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
			run.Message = "could not start the pipeline: " + err.Error()
			w.addHistory(ctx, run)
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
		w.addHistory(ctx, run)
		w.followByActivity(ctx, run)
		return run
	case err != nil:
		run.Job, run.Outcome, run.FinishTime = "", schemas.RunStartFailed, &now
		run.Message = "could not start the " + noun + ": " + rootMessage(err)
		w.addHistory(ctx, run)
		return run
	}
	run.StartTime, run.Outcome = &now, schemas.RunRunning
	w.st.LastStart = now
	w.st.Counts.Started++
	w.st.Running = append(w.st.Running, run)
	w.addHistory(ctx, run)
	workflow.Go(ctx, func(ctx workflow.Context) {
		w.finished(ctx, run.Job, c.outcome(ctx, child))
	})
	return run
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
