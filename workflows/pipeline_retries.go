package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Per-step retries and timeouts of a pipeline's job steps (spec.steps[*].retries and
// .timeout): a try whose job fails, or runs over the step's timeout (its job is then
// stopped), is retried as a new job <run>-<step>-r<N> after a backoff, until the step's
// retries are spent; then the step fails, with reason StepTimeout when the last try ran
// over its timeout.

// retriesOn reports whether step i has retries or a timeout.
func (w *pipelineWorkflow) retriesOn(i int) bool {
	st := &w.steps[i]
	return st.Retries != nil || st.Timeout != nil
}

// addStepFutures makes sel wait for step i: its job's end and its timeout, or the end
// of its backoff.
func (w *pipelineWorkflow) addStepFutures(ctx workflow.Context, sel workflow.Selector, i int, j *stepJob) {
	if j.fan != nil {
		w.addFanOutFutures(ctx, sel, i, j.fan)
		return
	}
	if j.backoff != nil {
		sel.AddFuture(j.backoff, func(workflow.Future) {
			w.jobs[i] = nil
			if w.ending == "" {
				w.startJob(ctx, i)
			}
		})
		return
	}
	if j.experiment != nil {
		sel.AddFuture(j.future, func(f workflow.Future) { w.experimentDone(ctx, i, f) })
		return
	}
	sel.AddFuture(j.future, func(f workflow.Future) { w.jobDone(ctx, i, f) })
	if j.timeout != nil && !j.timedOut {
		sel.AddFuture(j.timeout, func(f workflow.Future) {
			if f.Get(ctx, nil) == nil { // not cancelled
				w.stepTimedOut(ctx, i, j)
			}
		})
	}
}

// retryName names a retry's job <run>-<step>-r<N>.
func (w *pipelineWorkflow) retryName(i int, built *activities.BuildStepJobResult) {
	st := &w.status.Steps[i]
	if st.Attempts == 0 {
		return
	}
	name := schemas.StepRetryJobName(w.in.Pipeline.Metadata.Name, st.Name, st.Attempts)
	built.Job.Metadata.Name = name
	if built.Outputs != nil {
		built.Outputs[schemas.OutputJob] = name
	}
	st.Job, st.JobUID = name, ""
}

// startTimeout starts the timer of step i's try, when the step has a timeout.
func (w *pipelineWorkflow) startTimeout(ctx workflow.Context, i int) {
	st := &w.steps[i]
	if st.Timeout == nil || !w.retriesOn(i) {
		return
	}
	j := w.jobs[i]
	tctx, cancel := workflow.WithCancel(ctx)
	j.timeout, j.cancelTimeout = workflow.NewTimer(tctx, st.Timeout.D()), cancel
}

// stepTimedOut stops the job of a try that ran over its step's timeout; jobDone then
// fails the try with ReasonStepTimeout.
func (w *pipelineWorkflow) stepTimedOut(ctx workflow.Context, i int, j *stepJob) {
	if w.jobs[i] != j || j.cancelling {
		return
	}
	j.timedOut = true
	st := &w.status.Steps[i]
	st.Reason, st.Message = ReasonStepTimeout, fmt.Sprintf("job %s ran over the step's timeout; stopping it", st.Job)
	stop := stopJob(ctx, activities.StopJobInput{
		WorkflowID: JobWorkflowID(w.in.Pipeline.Metadata.Workspace, st.Job),
		UpdateName: UpdateStop,
		Reason:     "the pipeline step's timeout passed",
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := stop.wait(ctx); err != nil {
			w.logger.Error("could not stop a timed-out step's job", "job", st.Job, "error", err)
		}
	})
}

// tryFailed ends a failed try of step i: the step is retried after its backoff while it
// has retries left, else it fails.
func (w *pipelineWorkflow) tryFailed(ctx workflow.Context, i int, reason, msg string) {
	spec := &w.steps[i]
	st := &w.status.Steps[i]
	if spec.Retries == nil || st.Attempts >= int(spec.Retries.Count) || w.ending != "" || !w.retriesOn(i) {
		if st.Attempts > 0 {
			msg = fmt.Sprintf("%s (try %d of %d)", msg, st.Attempts+1, st.Attempts+1)
		}
		w.endStep(ctx, i, schemas.StepFailed, reason, msg)
		return
	}
	st.Attempts++
	wait := schemas.StepBackoff(spec.Retries, st.Attempts)
	st.Reason = ReasonRetrying
	st.Message = fmt.Sprintf("%s: %s; try %d of %d in %s", reason, msg, st.Attempts+1, spec.Retries.Count+1, wait)
	w.jobs[i] = &stepJob{backoff: workflow.NewTimer(ctx, wait)}
	w.stepPhaseEvent(ctx, i, schemas.StepRunning)
}

// cancelRetry ends a step that waits to retry when the pipeline ends.
func (w *pipelineWorkflow) cancelRetry(ctx workflow.Context, i int) {
	w.jobs[i] = nil
	st := &w.status.Steps[i]
	w.endStep(ctx, i, schemas.StepCancelled, ReasonPipelineEnded, fmt.Sprintf("not retried: the pipeline %s (%s)", w.ending, st.Message))
}
