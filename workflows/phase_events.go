package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Phase events of experiments and pipeline runs (events.TypeExperimentPhase,
// events.TypePipelinePhase), queued in the workflow's outbox like a job's status
// events. Both are versioned changes: a workflow whose history predates them publishes
// none.

// experimentPhaseEvent queues the experiment's phase event for its move from previous
// to its current phase. The experiment calls it at each phase transition (setPhase).
func (w *experimentWorkflow) experimentPhaseEvent(ctx workflow.Context, previous schemas.ExperimentPhase) {
	if previous == w.st.Phase {
		return
	}
	w.queueExperimentPhase(ctx, string(previous), w.st.Reason, w.st.Message)
}

// pendingPhaseEvents reports whether this workflow publishes a Pending phase event when
// it starts (changePendingPhaseEvents): call it once, at the start of a first run.
func pendingPhaseEvents(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changePendingPhaseEvents, workflow.DefaultVersion, 1) == 1
}

// experimentPendingEvent queues the experiment's first phase event, Pending with no
// previous phase, as a job's first event is; the Running event that follows names
// Pending as its previous phase. The experiment calls it at the start of its first run.
func (w *experimentWorkflow) experimentPendingEvent(ctx workflow.Context) {
	if pendingPhaseEvents(ctx) {
		w.queueExperimentPhase(ctx, "", ReasonAccepted, "experiment accepted")
	}
}

// queueExperimentPhase queues an event for the experiment's current phase.
func (w *experimentWorkflow) queueExperimentPhase(ctx workflow.Context, previous, reason, message string) {
	ws, name := w.exp.Metadata.Workspace, w.exp.Metadata.Name
	st := w.status()
	w.st.EventSeq++
	id := fmt.Sprintf("%s:phase:%d", w.st.UID, w.st.EventSeq)
	data := events.ExperimentPhaseData{Experiment: name, UID: w.st.UID, Seq: w.st.EventSeq, Phase: string(w.st.Phase),
		Previous: previous, Reason: reason, Message: message,
		Trials: len(st.Trials), MaxTrials: st.MaxTrials, Completed: st.Completed, Failed: st.Failed, Pruned: st.Pruned,
		BestTrial: st.BestTrial, BestValue: st.BestValue}
	ev, err := events.New(id, events.TypeExperimentPhase, ws, ExperimentSource(ws, name), name, workflow.Now(ctx), data)
	if err == nil {
		err = w.events.addEvent(events.ExperimentStatusSubject(ws, name), ev)
	}
	if err != nil {
		w.logger.Error("could not encode an experiment phase event", "error", err)
	}
}

// pipelineEvents holds a pipeline run's outbox and event count.
type pipelineEvents struct {
	outbox *outbox
	seq    int
}

// startPhaseEvents starts the run's outbox.
func (w *pipelineWorkflow) startPhaseEvents(ctx workflow.Context) {
	w.events.outbox = newOutbox(ctx, "pipeline events")
}

// runPhaseEvent queues the run's phase event for its move from previous.
func (w *pipelineWorkflow) runPhaseEvent(ctx workflow.Context, previous schemas.PipelinePhase) {
	w.pipelineEvent(ctx, events.PipelinePhaseData{Phase: string(w.status.Phase), Previous: string(previous),
		Reason: w.status.Reason, Message: w.status.Message})
}

// runPendingEvent queues the run's first phase event, Pending with no previous phase,
// as a job's first event is. The run calls it when it starts.
func (w *pipelineWorkflow) runPendingEvent(ctx workflow.Context) {
	if pendingPhaseEvents(ctx) {
		w.pipelineEvent(ctx, events.PipelinePhaseData{Phase: string(schemas.PipelinePending),
			Reason: ReasonAccepted, Message: "pipeline run accepted"})
	}
}

// stepPhaseEvent queues step i's phase event for its move from previous.
func (w *pipelineWorkflow) stepPhaseEvent(ctx workflow.Context, i int, previous schemas.StepPhase) {
	st := &w.status.Steps[i]
	if st.Phase == previous && previous != schemas.StepRunning {
		return
	}
	w.pipelineEvent(ctx, events.PipelinePhaseData{Step: st.Name, Phase: string(st.Phase), Previous: string(previous),
		Reason: st.Reason, Message: st.Message, Job: st.Job, Attempt: st.Attempts})
}

func (w *pipelineWorkflow) pipelineEvent(ctx workflow.Context, data events.PipelinePhaseData) {
	ws, name := w.in.Pipeline.Metadata.Workspace, w.in.Pipeline.Metadata.Name
	w.events.seq++
	data.Pipeline, data.UID, data.Seq = name, w.uid, w.events.seq
	id := fmt.Sprintf("%s:phase:%d", w.uid, w.events.seq)
	ev, err := events.New(id, events.TypePipelinePhase, ws, events.PipelineSource(ws, name), name, workflow.Now(ctx), data)
	if err == nil {
		err = w.events.outbox.addEvent(events.PipelineStatusSubject(ws, name), ev)
	}
	if err != nil {
		w.logger.Error("could not encode a pipeline phase event", "error", err)
	}
}

// drainPhaseEvents waits until every queued event of the run is published.
func (w *pipelineWorkflow) drainPhaseEvents(ctx workflow.Context) {
	w.events.outbox.drain(ctx)
}
