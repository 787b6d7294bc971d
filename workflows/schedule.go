package workflows

import (
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
	// UID is the schedule's first run id: the uid of its run events, which tells apart
	// schedules of the same name. EventSeq numbers those events (schedule_events.go).
	UID      string `json:"uid,omitempty"`
	EventSeq int    `json:"eventSeq,omitempty"`
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
	// events is the outbox of the schedule's run events; nil when the history predates
	// them (schedule_events.go).
	events *outbox
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
	w.startRunEvents(ctx)

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

func (w *scheduleWorkflow) run(ctx workflow.Context) error {
	for {
		w.wake = false
		w.processRequests(ctx)
		fire, ok := w.processDue(ctx)
		w.startBuffered(ctx)
		if w.wake {
			continue // something changed while firing; look again before sleeping
		}
		// The next run's outbox starts empty: continue as new only once every run event
		// is published; until then sleep as usual, and wake when they are.
		publishing := false
		if w.shouldContinueAsNew(ctx) {
			if w.runEventsPublished() {
				return workflow.NewContinueAsNewError(ctx, ScheduleWorkflowName, ScheduleInput{
					Schedule: w.spec, State: &w.st, MaxHistoryEvents: w.in.MaxHistoryEvents,
				})
			}
			publishing = true
		}
		awake := func() bool { return w.wake || (publishing && w.runEventsPublished()) }
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
