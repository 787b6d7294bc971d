package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// onExit steps (spec.onExit): once every step of spec.steps has ended (Succeeded,
// Failed or Stopped: the steps that never started are Skipped first), the onExit steps
// run as a DAG of their own, with the outcome as ${pipeline.status},
// ${pipeline.failedStep} and ${pipeline.message}. A failed onExit step skips the onExit
// steps that depend on it but stops none of the others. The run's phase is its steps'
// outcome, except that a failed onExit step fails a run whose steps succeeded (reason
// OnExitFailed). A stop during spec.steps lets the onExit steps run; a stop while they
// run stops them (Cancelled) and ends the run Stopped unless it had failed.
//
// A run without onExit steps takes none of these branches, and onExit steps cannot be
// in a history recorded before they existed (validation refused the field), so this
// needs no workflow.GetVersion.

// Reasons of onExit steps.
const (
	// ReasonOnExitFailed: an onExit step failed after every step had succeeded (the run
	// Failed).
	ReasonOnExitFailed = "OnExitFailed"
)

// pipelineExit is the state of a run's onExit steps.
type pipelineExit struct {
	// running is set while the onExit steps run.
	running bool
	// outcome is what they read, once spec.steps have ended.
	outcome *activities.RunOutcome
	// failed names the onExit steps that failed.
	failed []string
}

// isExit reports whether step i is an onExit step.
func (w *pipelineWorkflow) isExit(i int) bool { return i >= len(w.in.Pipeline.Spec.Steps) }

// stepIndex returns the index of the named step (of spec.steps or spec.onExit), or -1.
func (w *pipelineWorkflow) stepIndex(name string) int {
	for i := range w.steps {
		if w.steps[i].Name == name {
			return i
		}
	}
	return -1
}

// outcomeFor is what step i knows of the run's outcome: nil but for an onExit step.
func (w *pipelineWorkflow) outcomeFor(i int) *activities.RunOutcome {
	if !w.isExit(i) {
		return nil
	}
	return w.exit.outcome
}

// runOnExit runs the onExit steps once spec.steps have ended.
func (w *pipelineWorkflow) runOnExit(ctx workflow.Context) {
	n := len(w.in.Pipeline.Spec.Steps)
	if len(w.steps) == n {
		return
	}
	w.skipPending(ctx, n)
	out := w.stepsOutcome(n)
	w.exit.outcome = &activities.RunOutcome{Status: out.phase, FailedStep: w.failedStep, Message: out.message}
	ending, failed := w.ending, w.failedStep
	w.ending, w.exit.running = "", true
	w.runSteps(ctx)
	w.exit.running = false
	stopped := w.ending == endStopped
	w.ending, w.failedStep = ending, failed
	if w.ending == "" && stopped {
		w.ending = endStopped
	}
}

// exitOutcome is the run's outcome once its onExit steps have ended: a failed onExit
// step fails a run whose steps succeeded.
func (w *pipelineWorkflow) exitOutcome(steps pipelineOutcome) pipelineOutcome {
	if len(w.exit.failed) == 0 || steps.phase != schemas.PipelineSucceeded {
		return steps
	}
	msgs := make([]string, len(w.exit.failed))
	for k, name := range w.exit.failed {
		msgs[k] = name
		if st := w.status.Step(name); st != nil && st.Message != "" {
			msgs[k] += ": " + st.Message
		}
	}
	return pipelineOutcome{schemas.PipelineFailed, ReasonOnExitFailed, fmt.Sprintf("onExit step %s failed", strings.Join(msgs, "; "))}
}
