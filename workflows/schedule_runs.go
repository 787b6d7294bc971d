package workflows

import (
	"maps"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Runs of the Schedule workflow: the child workflow each run starts, following runs to
// their end, stopping them, and the run history.

// runChild is the child workflow a run starts: how it is started, and how its result
// reads as the run's outcome.
type runChild struct {
	// start is how the child is started (workflows/start.go).
	start StartSpec
	// outcome waits for the child's result.
	outcome func(workflow.Context, workflow.Future) activities.JobOutcome
}

// kindNoun names what a run of kind k starts, in messages.
func kindNoun(k schemas.Kind) string {
	switch k {
	case schemas.KindExperiment:
		return "experiment"
	case schemas.KindPipeline:
		return "pipeline"
	}
	return "job"
}

// runWorkflowID is the workflow id of what a run started.
func runWorkflowID(workspace string, run schemas.ScheduleRun) string {
	switch run.Kind {
	case schemas.KindExperiment:
		return ExperimentWorkflowID(workspace, run.Job)
	case schemas.KindPipeline:
		return PipelineWorkflowID(workspace, run.Job)
	}
	return JobWorkflowID(workspace, run.Job)
}

// jobChild is a run's TrainingJob; it records the checkpoint the job resumes from.
func (w *scheduleWorkflow) jobChild(run *schemas.ScheduleRun) runChild {
	job := w.jobFor(*run)
	if ck := job.Spec.Checkpoint; ck != nil {
		run.ResumedFrom = ck.ResumeFrom
	}
	return runChild{
		start: JobStart(TrainingJobInput{Job: job}),
		outcome: childOutcome(func(res TrainingJobResult) activities.JobOutcome {
			return activities.JobOutcome{Found: true, Phase: res.Status.Phase, LastCheckpoint: res.Status.LastCheckpoint, Message: res.Status.Message}
		}),
	}
}

// experimentChild is a run's Experiment, started as the API starts one.
func (w *scheduleWorkflow) experimentChild(run schemas.ScheduleRun) runChild {
	t := w.spec.Spec.Action.ExperimentTemplate
	exp := schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       t.Spec,
	}
	return runChild{
		start: ExperimentStart(ExperimentInput{Experiment: exp}),
		outcome: childOutcome(func(res ExperimentResult) activities.JobOutcome {
			return activities.JobOutcome{Found: true, Phase: schemas.JobPhase(res.Status.Phase), Message: res.Status.Message}
		}),
	}
}

// pipelineChild is a run's Pipeline, started as the API starts one, with the
// template's parameters.
func (w *scheduleWorkflow) pipelineChild(run schemas.ScheduleRun) (runChild, error) {
	t := w.spec.Spec.Action.PipelineTemplate
	p := schemas.Pipeline{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindPipeline,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       t.Spec,
	}
	params, errs := p.Spec.ResolveParams(t.Params)
	if len(errs) > 0 {
		return runChild{}, errs
	}
	return runChild{
		start: PipelineStart(PipelineInput{Pipeline: p, Params: params}),
		outcome: childOutcome(func(res PipelineResult) activities.JobOutcome {
			return activities.JobOutcome{Found: true, Phase: schemas.JobPhase(res.Status.Phase), Message: res.Status.Message}
		}),
	}, nil
}

// pipelineRefChild is a run's Pipeline made from the stored template the schedule
// names, as the template is now: an activity reads it in the schedule's workspace and
// makes the run (its result is recorded, so a replay runs what this fire read). The
// problem, when not empty, says why no run starts (the template is missing, does not
// take the params, or cannot be read). A versioned change
// (changeSchedulePipelineTemplateRef), taken only on this path, which no earlier
// history can reach.
func (w *scheduleWorkflow) pipelineRefChild(ctx workflow.Context, run schemas.ScheduleRun, ref *schemas.SchedulePipelineTemplateRef) (runChild, string) {
	workflow.GetVersion(ctx, changeSchedulePipelineTemplateRef, workflow.DefaultVersion, 1)
	meta := w.runMeta(run, schemas.TemplateMeta{})
	res, err := resolvePipelineTemplate(ctx, activities.ResolvePipelineTemplateInput{
		Workspace: w.spec.Metadata.Workspace, Template: ref.Name, Run: run.Job,
		Labels: meta.Labels, Annotations: meta.Annotations, Params: ref.Params,
	})
	switch {
	case err != nil:
		return runChild{}, "could not read pipeline template " + ref.Name + ": " + rootMessage(err)
	case res.Problem != "":
		return runChild{}, res.Problem
	}
	return runChild{
		start: PipelineStart(PipelineInput{Pipeline: res.Pipeline, Params: res.Params}),
		outcome: childOutcome(func(res PipelineResult) activities.JobOutcome {
			return activities.JobOutcome{Found: true, Phase: schemas.JobPhase(res.Status.Phase), Message: res.Status.Message}
		}),
	}, ""
}

// childOutcome reads a run's child result of type R with outcome; a child that failed
// (its future's error) is a Failed run with the error's root message.
func childOutcome[R any](outcome func(R) activities.JobOutcome) func(workflow.Context, workflow.Future) activities.JobOutcome {
	return func(ctx workflow.Context, f workflow.Future) activities.JobOutcome {
		var res R
		if err := f.Get(ctx, &res); err != nil {
			return activities.JobOutcome{Found: true, Phase: schemas.JobFailed, Message: rootMessage(err)}
		}
		return outcome(res)
	}
}

// runMeta is the metadata of what a run starts: its name, the schedule's workspace, the
// template's labels plus the schedule's, its annotations plus the nominal time and the
// trigger.
func (w *scheduleWorkflow) runMeta(run schemas.ScheduleRun, t schemas.TemplateMeta) schemas.ObjectMeta {
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[schemas.LabelSchedule] = w.spec.Metadata.Name
	annotations := maps.Clone(t.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[schemas.AnnotationNominalTime] = run.NominalTime.UTC().Format(time.RFC3339)
	annotations[schemas.AnnotationRunTrigger] = string(run.Trigger)
	return schemas.ObjectMeta{Name: run.Job, Workspace: w.spec.Metadata.Workspace, Labels: labels, Annotations: annotations}
}

// jobFor builds the job of a run from the template: its name, the schedule's label,
// the nominal time, and the checkpoint to resume from.
func (w *scheduleWorkflow) jobFor(run schemas.ScheduleRun) schemas.TrainingJob {
	t := w.spec.Spec.Action.JobTemplate
	spec := t.Spec
	if spec.Checkpoint != nil {
		ck := *spec.Checkpoint
		if w.spec.Spec.RunOptions.ResumeFromPreviousCheckpoint && w.st.LastCheckpoint != "" {
			ck.ResumeFrom = w.st.LastCheckpoint
		}
		spec.Checkpoint = &ck
	}
	return schemas.TrainingJob{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindTrainingJob,
		Metadata:   w.runMeta(run, t.Metadata),
		Spec:       spec,
	}
}

// followByActivity learns how a run this workflow holds no child future for ends.
func (w *scheduleWorkflow) followByActivity(ctx workflow.Context, run schemas.ScheduleRun) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		out, err := waitScheduledJob(ctx, activities.WaitScheduledJobInput{WorkflowID: runWorkflowID(w.spec.Metadata.Workspace, run)})
		if err != nil {
			out = activities.JobOutcome{Found: true, Phase: schemas.JobFailed,
				Message: "could not follow the " + kindNoun(run.Kind) + ": " + rootMessage(err)}
		}
		w.finished(ctx, run.Job, out)
	})
}

// finished records the end of a running run.
func (w *scheduleWorkflow) finished(ctx workflow.Context, job string, out activities.JobOutcome) {
	i := -1
	for j, r := range w.st.Running {
		if r.Job == job {
			i = j
			break
		}
	}
	if i < 0 {
		return
	}
	run := w.st.Running[i]
	w.st.Running = append(w.st.Running[:i:i], w.st.Running[i+1:]...)
	delete(w.stopping, job)
	now := workflow.Now(ctx)
	run.FinishTime = &now
	switch {
	case !out.Found:
		run.Outcome, run.Message = schemas.RunUnknown, "the "+kindNoun(run.Kind)+" no longer exists (deleted before its end was learnt)"
	case out.Phase == schemas.JobSucceeded:
		run.Outcome = schemas.RunSucceeded
	case out.Phase == schemas.JobStopped:
		run.Outcome = schemas.RunStopped
	default:
		run.Outcome = schemas.RunFailed
	}
	if out.Message != "" {
		run.Message = out.Message
	}
	run.Checkpoint = out.LastCheckpoint
	if run.Checkpoint != "" && !run.NominalTime.Before(w.st.LastCheckpointNominal) {
		w.st.LastCheckpoint, w.st.LastCheckpointNominal = run.Checkpoint, run.NominalTime
	}
	w.addHistory(ctx, run)
	w.wake = true
}

// stopRunning stops every running run (cancelOther) through its stop update; each
// one's end arrives as usual. A stopped experiment does not end (it waits for a resume),
// so for an experiment the answer Stopped is the run's end.
func (w *scheduleWorkflow) stopRunning(ctx workflow.Context, reason string) {
	for _, r := range w.st.Running {
		if w.stopping[r.Job] {
			continue
		}
		w.stopping[r.Job] = true
		id := runWorkflowID(w.spec.Metadata.Workspace, r)
		workflow.Go(ctx, func(ctx workflow.Context) {
			res, err := stopScheduledJob(ctx, activities.StopScheduledJobInput{WorkflowID: id, Reason: reason})
			if err != nil {
				w.logger.Error("stop scheduled run failed", "workflowId", id, "error", err)
				return
			}
			if r.Kind == schemas.KindExperiment && res.Phase == string(schemas.ExperimentStopped) {
				w.finished(ctx, r.Job, activities.JobOutcome{Found: true, Phase: schemas.JobStopped, Message: reason})
			}
		})
	}
}

// addHistory records a run, replacing the entry of the same job (or, for runs without
// a job, the same nominal time and trigger), and keeps the history bounded.
func (w *scheduleWorkflow) addHistory(ctx workflow.Context, run schemas.ScheduleRun) {
	w.runEvent(ctx, run)
	for i := len(w.st.History) - 1; i >= 0; i-- {
		h := w.st.History[i]
		if (run.Job != "" && h.Job == run.Job) || (run.Job == "" && h.Job == "" && h.NominalTime.Equal(run.NominalTime) && h.Trigger == run.Trigger && h.Outcome == run.Outcome) {
			w.st.History[i] = run
			return
		}
	}
	w.st.History = append(w.st.History, run)
	w.trimHistory()
}

func (w *scheduleWorkflow) trimHistory() {
	if n := int(w.spec.Spec.HistoryLimit); n > 0 && len(w.st.History) > n {
		w.st.History = append([]schemas.ScheduleRun(nil), w.st.History[len(w.st.History)-n:]...)
	}
}
