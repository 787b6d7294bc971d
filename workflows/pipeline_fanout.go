package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Fan-out of a job step over a list (withItems, withParam): BuildStepJob builds one
// child job per item, <run>-<step>-<i>; the step starts at most parallelism of them at
// once and starts the next as each ends. It succeeds once every child has succeeded; the
// first child that fails stops the running ones (Cancelled), starts no more (Skipped)
// and fails the step. Its outputs are JSON lists in item order: jobs (the children's job
// names), checkpointURI (with spec.checkpoint) and each declared output; it has no
// metrics.
//
// No change id: a pipeline without withItems or withParam takes none of these branches,
// and no history recorded before them can hold the fields, which validation refused.

// ReasonChildFailed is a fan-out step's reason when one of its children failed.
const ReasonChildFailed = "ChildFailed"

// fanOut is a running fan-out step.
type fanOut struct {
	children []activities.BuildStepJobResult
	futures  []workflow.ChildWorkflowFuture // nil until the child has started
	limit    int
	next     int
	running  int
	// stopping is set once a child failed or the pipeline ended: no more children start.
	stopping bool
	// failed is the first failed child's message.
	failed string
}

// startFanOut starts the first children of fan-out step i.
func (w *pipelineWorkflow) startFanOut(ctx workflow.Context, i int, built *activities.BuildStepJobResult) {
	limit := int(w.steps[i].Parallelism)
	if limit <= 0 || limit > len(built.Children) {
		limit = len(built.Children)
	}
	f := &fanOut{children: built.Children, futures: make([]workflow.ChildWorkflowFuture, len(built.Children)), limit: limit}
	st := &w.status.Steps[i]
	st.Children = make([]schemas.StepChild, len(built.Children))
	for k, c := range built.Children {
		st.Children[k] = schemas.StepChild{Index: k, Job: c.Job.Metadata.Name, Phase: schemas.StepPending}
	}
	w.jobs[i] = &stepJob{fan: f}
	previous := st.Phase
	st.Phase = schemas.StepRunning
	st.Reason, st.Message = ReasonJobStarted, fmt.Sprintf("%d jobs, at most %d at once", len(f.children), limit)
	w.stepPhaseEvent(ctx, i, previous)
	w.startFanOutChildren(ctx, i, f)
}

// startFanOutChildren starts children of step i until parallelism of them run.
func (w *pipelineWorkflow) startFanOutChildren(ctx workflow.Context, i int, f *fanOut) {
	for !f.stopping && w.ending == "" && f.running < f.limit && f.next < len(f.children) {
		k := f.next
		f.next++
		c := &f.children[k]
		fut := JobStartWithLabels(TrainingJobInput{Job: c.Job, Parent: w.uid}, c.LabelKeywords).ExecuteChild(ctx)
		f.futures[k] = fut
		f.running++
		w.status.Steps[i].Children[k].Phase = schemas.StepRunning
		workflow.Go(ctx, func(ctx workflow.Context) {
			var exec workflow.Execution
			if err := fut.GetChildWorkflowExecution().Get(ctx, &exec); err == nil {
				w.status.Steps[i].Children[k].JobUID = exec.RunID
			}
		})
	}
}

// addFanOutFutures makes sel wait for the running children of step i.
func (w *pipelineWorkflow) addFanOutFutures(ctx workflow.Context, sel workflow.Selector, i int, f *fanOut) {
	for k, fut := range f.futures {
		if fut != nil && w.status.Steps[i].Children[k].Phase == schemas.StepRunning {
			sel.AddFuture(fut, func(r workflow.Future) { w.fanOutChildDone(ctx, i, k, r) })
		}
	}
}

// fanOutChildDone records the end of child k of step i, starts the next child or, after
// a failure, stops the others, and ends the step once no child runs.
func (w *pipelineWorkflow) fanOutChildDone(ctx workflow.Context, i, k int, r workflow.Future) {
	j := w.jobs[i]
	f := j.fan
	f.running--
	c := &w.status.Steps[i].Children[k]
	var res TrainingJobResult
	err := r.Get(ctx, &res)
	var exists *temporal.ChildWorkflowExecutionAlreadyStartedError
	switch {
	case errors.As(err, &exists):
		c.Phase, c.Message = schemas.StepFailed, fmt.Sprintf("a job named %s already exists in workspace %s", c.Job, w.in.Pipeline.Metadata.Workspace)
	case err != nil:
		c.Phase, c.Message = schemas.StepFailed, fmt.Sprintf("job %s: %s", c.Job, rootMessage(err))
	case res.Status.Phase == schemas.JobSucceeded:
		c.Phase, c.Message = schemas.StepSucceeded, ""
	case f.stopping && res.Status.Phase == schemas.JobStopped:
		c.Phase, c.Message = schemas.StepCancelled, "stopped: "+w.fanOutStopCause(f)
	default:
		msg := fmt.Sprintf("job %s %s", c.Job, strings.ToLower(string(res.Status.Phase)))
		if res.Status.Message != "" {
			msg += ": " + res.Status.Message
		}
		c.Phase, c.Message = schemas.StepFailed, msg
	}
	if c.Phase == schemas.StepFailed && f.failed == "" && w.ending == "" {
		f.failed = fmt.Sprintf("item %d: %s", k, c.Message)
		w.stopFanOut(ctx, i, f, fmt.Sprintf("pipeline step %s failed: %s", w.steps[i].Name, f.failed), nil)
	}
	w.startFanOutChildren(ctx, i, f)
	if f.running == 0 {
		w.fanOutDone(ctx, i, f)
	}
}

// fanOutStopCause says why a fan-out step's children are stopped.
func (w *pipelineWorkflow) fanOutStopCause(f *fanOut) string {
	if f.failed != "" {
		return "a sibling failed (" + f.failed + ")"
	}
	return "the pipeline " + w.ending
}

// stopFanOut stops the running children of step i and starts no more. With stops
// nil it does not wait for the stops; else it adds them there.
func (w *pipelineWorkflow) stopFanOut(ctx workflow.Context, i int, f *fanOut, reason string, stops *[]doneFuture) {
	if f.stopping {
		return
	}
	f.stopping = true
	var started []doneFuture
	for k, fut := range f.futures {
		if fut == nil || w.status.Steps[i].Children[k].Phase != schemas.StepRunning {
			continue
		}
		// Stop only a child that has started: one whose start failed ends on its own.
		if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			continue
		}
		started = append(started, stopJob(ctx, activities.StopJobInput{
			WorkflowID: JobWorkflowID(w.in.Pipeline.Metadata.Workspace, w.status.Steps[i].Children[k].Job),
			UpdateName: UpdateStop,
			Reason:     reason,
		}))
	}
	if stops != nil {
		*stops = append(*stops, started...)
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for _, s := range started {
			if err := s.wait(ctx); err != nil {
				w.logger.Error("could not stop a fan-out step's child job", "step", w.steps[i].Name, "error", err)
			}
		}
	})
}

// fanOutDone ends fan-out step i once none of its children runs.
func (w *pipelineWorkflow) fanOutDone(ctx workflow.Context, i int, f *fanOut) {
	w.jobs[i] = nil
	st := &w.status.Steps[i]
	for k := range st.Children {
		if st.Children[k].Phase == schemas.StepPending {
			st.Children[k].Phase, st.Children[k].Message = schemas.StepSkipped, "not started: "+w.fanOutStopCause(f)
		}
	}
	switch {
	case f.failed != "":
		w.endStep(ctx, i, schemas.StepFailed, ReasonChildFailed, f.failed)
	case w.ending != "":
		w.endStep(ctx, i, schemas.StepCancelled, ReasonPipelineEnded, "its jobs were stopped: the pipeline "+w.ending)
	default:
		outputs := fanOutOutputs(f.children)
		st.Outputs = outputs
		w.results[st.Name] = activities.StepResult{Outputs: outputs}
		w.endStep(ctx, i, schemas.StepSucceeded, ReasonJobSucceeded, fmt.Sprintf("%d jobs succeeded", len(f.children)))
	}
}

// fanOutOutputs are a fan-out step's outputs: for each key its children have (jobs for
// job, checkpointURI, the declared outputs), a JSON list of their values in item order.
func fanOutOutputs(children []activities.BuildStepJobResult) map[string]string {
	out := map[string]string{}
	if len(children) == 0 {
		return out
	}
	// Every child has the same keys, the step's. The order of the keys does not
	// matter: each gives one entry of a map (internal/tools/workflowcheck.yaml).
	for k := range children[0].Outputs {
		l := make([]string, len(children))
		for n, c := range children {
			l[n] = c.Outputs[k]
		}
		b, _ := json.Marshal(l)
		if k == schemas.OutputJob {
			k = schemas.OutputJobs
		}
		out[k] = string(b)
	}
	return out
}
