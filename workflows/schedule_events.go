package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Run events of the Schedule workflow (events.TypeScheduleRun): one event each time the
// schedule records what became of a run (started, buffered, skipped, missed, failed to
// start, ended), queued in the workflow's outbox like a job's status events, with the
// message id <schedule uid>:run:<seq>. The uid and seq are carried across continue-as-new, and the
// outbox is emptied before it, so a restarted worker republishes the same ids and
// JetStream drops the duplicates. A versioned change (changeScheduleRunEvents): a
// workflow whose history predates it publishes none until it continues as new.

// Actions of a schedule run event (events.ScheduleRunData.Action).
const (
	runActionStarted     = "Started"
	runActionBuffered    = "Buffered"
	runActionSkipped     = "Skipped"
	runActionMissed      = "Missed"
	runActionStartFailed = "StartFailed"
	runActionFinished    = "Finished"
)

// startRunEvents starts the run events' outbox, unless the history predates them.
func (w *scheduleWorkflow) startRunEvents(ctx workflow.Context) {
	if workflow.GetVersion(ctx, changeScheduleRunEvents, workflow.DefaultVersion, 1) != 1 {
		return
	}
	if w.st.UID == "" {
		w.st.UID = workflow.GetInfo(ctx).FirstRunID
	}
	w.events = newOutbox(ctx, "schedule run events")
}

// runAction is the action of the event for a run recorded with its outcome.
func runAction(run schemas.ScheduleRun) string {
	switch run.Outcome {
	case schemas.RunRunning:
		return runActionStarted
	case schemas.RunBuffered:
		return runActionBuffered
	case schemas.RunSkipped, schemas.RunNoNewData:
		return runActionSkipped
	case schemas.RunMissed:
		return runActionMissed
	case schemas.RunStartFailed:
		return runActionStartFailed
	}
	return runActionFinished
}

// runEvent queues the event for what became of run.
func (w *scheduleWorkflow) runEvent(ctx workflow.Context, run schemas.ScheduleRun) {
	if w.events == nil {
		return
	}
	ws, name := w.spec.Metadata.Workspace, w.spec.Metadata.Name
	w.st.EventSeq++
	kind := run.Kind
	if kind == "" {
		kind = schemas.KindTrainingJob
	}
	data := events.ScheduleRunData{Schedule: name, UID: w.st.UID, Seq: w.st.EventSeq, Action: runAction(run),
		Outcome: string(run.Outcome), Trigger: string(run.Trigger), ScheduledTime: run.NominalTime.UTC(),
		Kind: string(kind), Target: run.Job, StartTime: run.StartTime, FinishTime: run.FinishTime,
		Message: run.Message, Checkpoint: run.Checkpoint}
	id := fmt.Sprintf("%s:run:%d", w.st.UID, w.st.EventSeq)
	ev, err := events.New(id, events.TypeScheduleRun, ws, events.ScheduleSource(ws, name), name, workflow.Now(ctx), data)
	if err == nil {
		err = w.events.addEvent(events.ScheduleRunSubject(ws, name), ev)
	}
	if err != nil {
		w.logger.Error("could not encode a schedule run event", "error", err)
	}
}

// runEventsPublished reports whether every queued run event is published (always,
// without run events).
func (w *scheduleWorkflow) runEventsPublished() bool {
	return w.events == nil || w.events.idle()
}
