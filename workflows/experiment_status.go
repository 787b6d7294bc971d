package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// What the Experiment workflow shows and answers: its query view, its stop, resume and
// extend updates, its phase, its status and its trial events.

// ExperimentView is what the status query returns.
type ExperimentView struct {
	UID        string                   `json:"uid"`
	Experiment schemas.Experiment       `json:"experiment"`
	Status     schemas.ExperimentStatus `json:"status"`
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

func (w *experimentWorkflow) handleStop(ctx workflow.Context, req StopRequest) (ExperimentUpdateResult, error) {
	// A stop sent right after the create can be handled before the run has left
	// Pending: it waits for that (Running, or Failed on a bad spec) instead of being
	// ignored and answering Pending.
	if err := workflow.Await(ctx, func() bool { return w.st.Phase != schemas.ExperimentPending }); err != nil {
		return ExperimentUpdateResult{}, err
	}
	if w.st.Phase == schemas.ExperimentRunning && w.ending == nil {
		reason := req.Reason
		if reason == "" {
			reason = "stopped by request"
		}
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentStopping, ReasonStopRequested, reason})
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
		w.setPhase(ctx, experimentOutcome{schemas.ExperimentRunning, ReasonResumed, msg})
		w.changed = true
	}
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

func (w *experimentWorkflow) handleExtend(_ workflow.Context, req ExtendRequest) (ExperimentUpdateResult, error) {
	w.st.MaxTrials = req.MaxTrials
	w.changed = true
	return ExperimentUpdateResult{Phase: w.st.Phase, MaxTrials: w.st.MaxTrials}, nil
}

func (w *experimentWorkflow) setPhase(ctx workflow.Context, to experimentOutcome) {
	previous := w.st.Phase
	w.st.Phase, w.st.Reason, w.st.Message = to.phase, to.reason, to.message
	w.experimentPhaseEvent(ctx, previous)
	w.upsertPhase(ctx)
	w.logger.Info("experiment phase", "phase", to.phase, "reason", to.reason, "message", to.message)
}

func (w *experimentWorkflow) upsertPhase(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(string(w.st.Phase))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}
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
		cons, feasible := w.trialConstraints(t)
		st.Trials = append(st.Trials, schemas.TrialStatus{
			ID: t.ID, Job: t.Job, Attempts: t.Attempt + 1, Phase: t.Phase, Params: w.paramValues(t.Params),
			Value: t.Value, Values: w.trialValues(t), Constraints: cons, Feasible: feasible, Enqueued: t.Enqueued,
			Step: t.Step, Reports: t.Reports, Message: t.Message,
			StartTime: t.StartTime, FinishTime: t.FinishTime, PBT: w.trialLineage(t),
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
	for _, q := range w.st.Queue {
		st.Queued = append(st.Queued, w.paramValues(q.Params))
	}
	if w.st.Warm != nil {
		st.WarmStart = &schemas.WarmStartStatus{Trials: len(w.st.Warm.Trials), Notes: w.st.Warm.Notes}
	}
	if w.exp.Spec.MultiObjective() {
		st.ParetoFront = w.paretoFront()
	} else if best, ok := hpo.Best(w.allTrialsHistory()); ok {
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
	t.EventSeq++
	id := fmt.Sprintf("%s:trial:%d", w.st.UID, w.st.EventSeq)
	data := events.TrialData{Experiment: name, UID: w.st.UID, TrialID: t.ID, Seq: t.EventSeq, Trial: t.Job, Phase: string(t.Phase),
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
