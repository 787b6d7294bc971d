package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// What the Schedule workflow answers: its query view and its pause, resume, trigger,
// backfill and spec updates, and the search attributes and memo the list call reads.

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

// The schedule updates' requests and results are the workflow's own: the service
// converts the API's types to and from them. Their JSON is what recorded histories hold,
// so a field, type or tag must not change (the API's types have the same JSON today).

// PauseScheduleRequest pauses a schedule.
type PauseScheduleRequest struct {
	// Note says why; shown by get.
	Note string `json:"note,omitempty"`
}

// TriggerScheduleRequest runs a schedule's action now.
type TriggerScheduleRequest struct {
	// OverlapPolicy overrides the schedule's for this run; allowAll runs it even while
	// another run runs.
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// TriggerScheduleResult is the triggered run (or the one found, when triggered twice in
// one second).
type TriggerScheduleResult struct {
	Run schemas.ScheduleRun `json:"run"`
}

// BackfillScheduleRequest runs every nominal time of [From, To) once.
type BackfillScheduleRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// OverlapPolicy is bufferAll (default: one after another) or allowAll (all at once).
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// BackfillScheduleResult lists the backfill's runs as they were dealt with: started,
// waiting, or already run before.
type BackfillScheduleResult struct {
	Runs []schemas.ScheduleRun `json:"runs"`
}

// ResumeScheduleRequest resumes a paused schedule.
type ResumeScheduleRequest struct{}

// UpdateScheduleRequest replaces a schedule's spec.
type UpdateScheduleRequest struct {
	// Schedule is the validated, defaulted document; its name and workspace must not
	// change.
	Schedule schemas.Schedule `json:"schedule"`
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
