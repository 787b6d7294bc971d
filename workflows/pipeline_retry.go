package workflows

import (
	"fmt"
	"maps"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// A retry of a pipeline run (dlc pipeline retry) is a new run of the same pipeline and
// parameters whose input names the steps that succeeded in the run it retries: they
// start Succeeded (reason Reused) with that run's outputs and metrics, and the others
// (failed, cancelled, skipped) run. A run without Reused takes no branch of this file,
// and no history recorded before it can carry the field, so it needs no
// workflow.GetVersion.

// Reasons of a retry.
const (
	// ReasonReused: the step succeeded in the run this one retries; it was not run again
	// (Succeeded).
	ReasonReused = "Reused"
)

// PipelineReuse is what a retry takes from the run it retries.
type PipelineReuse struct {
	// From names the run retried.
	From string `json:"from"`
	// Steps are the statuses of its steps that succeeded (of spec.steps, not onExit).
	Steps []schemas.StepStatus `json:"steps"`
}

// reuseSteps marks the reused steps Succeeded with their recorded outputs and metrics.
// Their Job stays empty: the job is the retried run's (outputs.job names it), and
// deleting this run must not delete it.
func (w *pipelineWorkflow) reuseSteps() {
	r := w.in.Reused
	if r == nil {
		return
	}
	for _, src := range r.Steps {
		i := w.stepIndex(src.Name)
		if i < 0 || w.isExit(i) {
			continue
		}
		st := &w.status.Steps[i]
		st.Phase, st.Reason = schemas.StepSucceeded, ReasonReused
		st.Message = "succeeded in run " + r.From
		if job := src.Outputs[schemas.OutputJob]; job != "" {
			st.Message += fmt.Sprintf(" (job %s)", job)
		}
		st.Job, st.ReusedFrom = "", r.From
		st.Experiment = src.Experiment
		st.Outputs, st.Metrics = maps.Clone(src.Outputs), maps.Clone(src.Metrics)
		st.ConditionResult = src.ConditionResult
		st.StartTime, st.FinishTime = src.StartTime, src.FinishTime
		if w.steps[i].Condition == nil {
			w.results[src.Name] = activities.StepResult{Outputs: st.Outputs, Metrics: st.Metrics}
		}
	}
}
