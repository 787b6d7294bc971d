package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Continue-as-new of the Experiment workflow with its trials running.
//
// Once a run's history reaches ExperimentOptions.MaxHistoryEvents (8,000) or Temporal
// suggests continuing as new, the run starts no more trials and continues as new as soon
// as every running trial is at a point it can be carried from: its job has started (its
// run id is known) and has not ended (its result has not been taken). The run then
// carries, for each running trial, what the next run needs to follow it (CarriedRun):
// the job's run id, the metric stream sequence read so far, how many reports it
// numbered, and a pending stop. The trial jobs are children with parent-close policy
// ABANDON, so they keep running across the continue-as-new; the next run follows each
// one by its workflow id with the WaitScheduledJob activity (the one the Schedule
// workflow follows the runs of earlier runs with) instead of a child future, reads its
// metrics on from the carried sequence, and stops it if a stop was pending. Slots stay
// busy throughout, and a run's history stays within the bound plus the few events of
// the last workflow tasks.

// CarriedRun is what the next run needs to follow a trial whose job runs across
// continue-as-new.
type CarriedRun struct {
	// UID is the run id of the trial's job workflow.
	UID string `json:"uid"`
	// LastSeq is the metric stream sequence read so far; Ordinal how many reports were
	// numbered by position.
	LastSeq uint64 `json:"lastSeq,omitempty"`
	Ordinal int64  `json:"ordinal,omitempty"`
	// Stop is a stop requested of the job (a stopKind), with its reason; the next run
	// sends it again.
	Stop       int    `json:"stop,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

// carriable reports whether every running trial can be carried now: its job has
// started, so the next run can follow it by its workflow id and read its metrics.
func (w *experimentWorkflow) carriable() bool {
	for _, run := range w.runs {
		if run != nil && run.uid == "" {
			return false
		}
	}
	return true
}

// continueCarrying continues as new with the running trials carried, once the pending
// events are published. It returns nil when, by then, a trial can no longer be carried
// (a retry is starting its next job): the caller waits and tries again.
func (w *experimentWorkflow) continueCarrying(ctx workflow.Context) error {
	w.drainOutbox(ctx)
	if !w.carriable() {
		return nil
	}
	// Nothing yields from here on: the carried handles match the carried trials.
	for id, run := range w.runs {
		if run == nil {
			continue
		}
		w.st.Trials[id].Run = &CarriedRun{UID: run.uid, LastSeq: run.lastSeq, Ordinal: run.ordinal,
			Stop: int(run.stop), StopReason: run.stopReason}
	}
	w.logger.Info("continuing as new with running trials", "running", w.running,
		"events", workflow.GetInfo(ctx).GetCurrentHistoryLength())
	return workflow.NewContinueAsNewError(ctx, ExperimentWorkflowName,
		ExperimentInput{Experiment: w.in.Experiment, State: w.st, Options: w.in.Options, Parent: w.in.Parent})
}

// followCarried starts following the trials a previous run carried.
func (w *experimentWorkflow) followCarried(ctx workflow.Context) {
	for _, t := range w.st.Trials {
		c := t.Run
		if c == nil {
			continue
		}
		t.Run = nil
		if t.Phase != schemas.TrialRunning {
			continue
		}
		for len(w.runs) <= t.ID {
			w.runs = append(w.runs, nil)
		}
		run := &trialRun{wake: workflow.NewBufferedChannel(ctx, 1), uid: c.UID, lastSeq: c.LastSeq, ordinal: c.Ordinal,
			stop: stopKind(c.Stop), stopReason: c.StopReason, carried: true}
		if run.stop != stopNone {
			run.wake.SendAsync(true)
		}
		w.runs[t.ID] = run
		w.running++
		workflow.Go(ctx, func(ctx workflow.Context) { w.runTrial(ctx, t, run) })
	}
}

// followJob waits for the job of a carried trial, started by an earlier run, to end.
func (w *experimentWorkflow) followJob(ctx workflow.Context, t *TrialState) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		out, err := waitScheduledJob(ctx, activities.WaitScheduledJobInput{WorkflowID: JobWorkflowID(w.exp.Metadata.Workspace, t.Job)})
		switch {
		case err != nil:
			set.Set(nil, err)
		case !out.Found:
			set.Set(nil, fmt.Errorf("job %s no longer exists", t.Job))
		default:
			set.Set(TrainingJobResult{Status: schemas.JobStatus{Phase: out.Phase, Message: out.Message}}, nil)
		}
	})
	return f
}
