package workflows

import (
	"errors"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Experiment steps (spec.steps[*].experiment): the step runs its Experiment,
// <run>-<step>, as a child Experiment workflow (id ExperimentWorkflowID), and passes on
// its best trial: parameters, objective, trial id and job, and the best trial's newest
// complete checkpoint. The step fails when the experiment does not succeed or has no
// best trial. Stopping the pipeline stops the experiment (its stop update) and cancels
// the step without waiting for the experiment's workflow: a stopped experiment waits
// for a resume that the pipeline will not send.
//
// An experiment step cannot be in a history recorded before it existed (validation
// refused the field), so it needs no workflow.GetVersion: histories without one take
// none of these branches.

// Reasons of an experiment step.
const (
	// ReasonExperimentStarted: the step's experiment started (Running).
	ReasonExperimentStarted = "ExperimentStarted"
	// ReasonExperimentSucceeded: the experiment succeeded with a best trial (Succeeded).
	ReasonExperimentSucceeded = "ExperimentSucceeded"
	// ReasonExperimentFailed: the experiment could not start, or ended other than
	// Succeeded (Failed).
	ReasonExperimentFailed = "ExperimentFailed"
	// ReasonExperimentExists: an experiment of the step's name exists already (Failed).
	ReasonExperimentExists = "ExperimentExists"
	// ReasonNoCompletedTrial: the experiment succeeded without a completed trial, so it
	// has no best one (Failed).
	ReasonNoCompletedTrial = "NoCompletedTrial"
	// ReasonCheckpointUnreadable: the best trial's checkpoints could not be listed
	// (Failed).
	ReasonCheckpointUnreadable = "CheckpointUnreadable"
)

// startExperiment starts experiment step i's Experiment, built by BuildStepJob.
func (w *pipelineWorkflow) startExperiment(ctx workflow.Context, i int, built *activities.BuildStepJobResult) {
	exp := built.Experiment
	// Its labels (the run's, opendlc.io/pipeline and opendlc.io/pipeline-step) list it
	// as the API lists experiments.
	fut := ExperimentStart(ExperimentInput{Experiment: *exp, Parent: w.uid}).ExecuteChild(ctx)
	w.jobs[i] = &stepJob{future: fut, experiment: exp}
	st := &w.status.Steps[i]
	previous := st.Phase
	st.Experiment, st.Outputs = exp.Metadata.Name, built.Outputs
	st.Phase = schemas.StepRunning
	st.Reason, st.Message = ReasonExperimentStarted, fmt.Sprintf("experiment %s started", exp.Metadata.Name)
	w.stepPhaseEvent(ctx, i, previous)
}

// stepWorkflowID is the workflow id of what step i runs: its experiment or its job.
func (w *pipelineWorkflow) stepWorkflowID(i int) string {
	ws := w.in.Pipeline.Metadata.Workspace
	if j := w.jobs[i]; j != nil && j.experiment != nil {
		return ExperimentWorkflowID(ws, j.experiment.Metadata.Name)
	}
	return JobWorkflowID(ws, w.status.Steps[i].Job)
}

// experimentsStopped cancels the experiment steps among stopped whose experiment was
// stopped and is still running: their workflows wait for a resume, not for the end.
func (w *pipelineWorkflow) experimentsStopped(ctx workflow.Context, stopped []int) {
	for _, i := range stopped {
		j := w.jobs[i]
		if j == nil || j.experiment == nil || j.future.IsReady() {
			continue // it ended on its own: experimentDone reads how
		}
		w.jobs[i] = nil
		w.endStep(ctx, i, schemas.StepCancelled, ReasonPipelineEnded,
			fmt.Sprintf("experiment %s was stopped: the pipeline %s", j.experiment.Metadata.Name, w.ending))
	}
}

// experimentDone records the end of step i's experiment.
func (w *pipelineWorkflow) experimentDone(ctx workflow.Context, i int, f workflow.Future) {
	j := w.jobs[i]
	w.jobs[i] = nil
	name := j.experiment.Metadata.Name
	var res ExperimentResult
	err := f.Get(ctx, &res)
	var started *temporal.ChildWorkflowExecutionAlreadyStartedError
	switch {
	case errors.As(err, &started):
		w.endStep(ctx, i, schemas.StepFailed, ReasonExperimentExists,
			fmt.Sprintf("an experiment named %s already exists in workspace %s", name, w.in.Pipeline.Metadata.Workspace))
	case err != nil:
		w.endStep(ctx, i, schemas.StepFailed, ReasonExperimentFailed, fmt.Sprintf("experiment %s: %s", name, rootMessage(err)))
	case j.cancelling:
		w.endStep(ctx, i, schemas.StepCancelled, ReasonPipelineEnded,
			fmt.Sprintf("experiment %s ended %s: the pipeline %s", name, res.Status.Phase, w.ending))
	case res.Status.Phase != schemas.ExperimentSucceeded:
		msg := fmt.Sprintf("experiment %s ended %s", name, res.Status.Phase)
		if res.Status.Message != "" {
			msg += ": " + res.Status.Message
		}
		w.endStep(ctx, i, schemas.StepFailed, ReasonExperimentFailed, msg)
	case res.Status.BestTrial == nil || res.Status.BestValue == nil:
		w.endStep(ctx, i, schemas.StepFailed, ReasonNoCompletedTrial,
			fmt.Sprintf("experiment %s completed no trial (%d failed, %d pruned)", name, res.Status.Failed, res.Status.Pruned))
	default:
		w.experimentSucceeded(ctx, i, j.experiment, res.Status)
	}
}

// experimentSucceeded records an experiment step's outputs: its best trial's.
func (w *pipelineWorkflow) experimentSucceeded(ctx workflow.Context, i int, exp *schemas.Experiment, es schemas.ExperimentStatus) {
	st := &w.status.Steps[i]
	best := *es.BestTrial
	var trial *schemas.TrialStatus
	for k := range es.Trials {
		if es.Trials[k].ID == best {
			trial = &es.Trials[k]
		}
	}
	if trial == nil {
		w.endStep(ctx, i, schemas.StepFailed, ReasonNoCompletedTrial, fmt.Sprintf("experiment %s: best trial %d is not among its trials", exp.Metadata.Name, best))
		return
	}
	outputs := map[string]string{
		schemas.OutputExperiment: exp.Metadata.Name,
		schemas.OutputBestTrial:  strconv.Itoa(best),
		schemas.OutputBestJob:    trial.Job,
		schemas.OutputObjective:  strconv.FormatFloat(*es.BestValue, 'g', -1, 64),
	}
	for _, ps := range exp.Spec.SearchSpace {
		if v, ok := es.BestParams[ps.Name]; ok {
			outputs[schemas.OutputBestParamsPrefix+ps.Name] = paramText(v)
		}
	}
	if uri := activities.BestTrialCheckpointURI(exp, trial.Job); uri != "" {
		outputs[schemas.OutputCheckpointURI] = uri
		ck, err := latestCheckpoint(ctx, activities.LatestCheckpointInput{URI: uri, Workspace: exp.Metadata.Workspace})
		if err != nil {
			w.endStep(ctx, i, schemas.StepFailed, ReasonCheckpointUnreadable,
				fmt.Sprintf("listing the checkpoints of best trial %d (%s): %s", best, trial.Job, rootMessage(err)))
			return
		}
		if ck != "" {
			outputs[schemas.OutputCheckpoint] = ck
		}
	}
	metrics := events.Metrics{exp.Spec.Objective.Metric: *es.BestValue}
	st.Outputs, st.Metrics = outputs, metrics
	w.results[st.Name] = activities.StepResult{Outputs: outputs, Metrics: metrics}
	w.endStep(ctx, i, schemas.StepSucceeded, ReasonExperimentSucceeded,
		fmt.Sprintf("experiment %s succeeded: best trial %d (%s), %s %s", exp.Metadata.Name, best, trial.Job,
			exp.Spec.Objective.Metric, outputs[schemas.OutputObjective]))
}

// paramText is a best parameter's value as text: a number as Go's shortest form, a
// categorical choice as written.
func paramText(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}
