package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// WorkflowUpdater sends updates to workflows: the part of a Temporal client the pipeline
// activities use.
type WorkflowUpdater interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
}

// EventReader reads stored events back: the part of events/jetstream's Client the
// pipeline activities and the metrics file tails use.
type EventReader interface {
	ReadUntil(ctx context.Context, stream, filter string, done func() bool, fn func(subject string, data []byte) error) error
}

// PipelineActivities are the Pipeline workflow's activities: they read what a step's job
// reported and stop a step's job.
type PipelineActivities struct {
	Workflows WorkflowUpdater
	Events    EventReader
	// EventsStream is the JetStream stream that holds metric events.
	EventsStream string
}

// JobMetricsInput names a job and the run of it whose metrics are wanted.
type JobMetricsInput struct {
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	// UID is the job's uid: only its own metric events count, not those of an earlier
	// job of the same name.
	UID string `json:"uid"`
}

// JobMetricsResult is the last value of every metric the job reported.
type JobMetricsResult struct {
	Values events.Metrics `json:"values,omitempty"`
}

// JobMetrics reads a job's metric events (opendlc.job.metric.v1) back from JetStream and
// returns, for each metric key, the last value reported by any of its replicas, in
// stream order. A job that reported nothing has no values.
func (a *PipelineActivities) JobMetrics(ctx context.Context, in JobMetricsInput) (JobMetricsResult, error) {
	out := JobMetricsResult{Values: events.Metrics{}}
	err := a.Events.ReadUntil(ctx, a.EventsStream, events.JobMetricsSubject(in.Workspace, in.Job), nil,
		func(_ string, data []byte) error {
			var ev events.Event
			if json.Unmarshal(data, &ev) != nil || ev.Type != events.TypeJobMetric {
				return nil //nolint:nilerr // not a metric event: skip it
			}
			var m events.MetricData
			if json.Unmarshal(ev.Data, &m) != nil || (in.UID != "" && m.UID != in.UID) {
				return nil //nolint:nilerr // unreadable, or another run's: skip it
			}
			maps.Copy(out.Values, m.Values)
			return nil
		})
	if err != nil {
		return JobMetricsResult{}, fmt.Errorf("read metrics of %s/%s: %w", in.Workspace, in.Job, err)
	}
	return out, nil
}

// StopJobInput names a job's workflow and its stop update. The names are the caller's,
// so this package needs no workflow names.
type StopJobInput struct {
	WorkflowID string `json:"workflowID"`
	UpdateName string `json:"updateName"`
	Reason     string `json:"reason,omitempty"`
}

// StopJob asks a job to stop and returns once it is terminal. A job that has already
// finished, or that does not exist, needs no stopping.
func (a *PipelineActivities) StopJob(ctx context.Context, in StopJobInput) error {
	h, err := a.Workflows.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: in.WorkflowID,
		UpdateName: in.UpdateName,
		Args: []any{struct {
			Reason string `json:"reason,omitempty"`
		}{in.Reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var res struct {
			Phase schemas.JobPhase `json:"phase"`
		}
		err = h.Get(ctx, &res)
	}
	// A job that does not exist, or has completed (Temporal answers NotFound "workflow
	// execution already completed"), needs no stopping.
	var notFound *serviceerror.NotFound
	if err == nil || errors.As(err, &notFound) {
		return nil
	}
	return fmt.Errorf("stop %s: %w", in.WorkflowID, err)
}

// StepResult is what a finished job step passes on to later steps.
type StepResult struct {
	Outputs map[string]string `json:"outputs,omitempty"`
	Metrics events.Metrics    `json:"metrics,omitempty"`
}

// BuildStepJobInput is a job step to turn into its TrainingJob.
type BuildStepJobInput struct {
	// Run is the pipeline run's metadata: name, workspace, labels.
	Run  schemas.ObjectMeta   `json:"run"`
	Step schemas.PipelineStep `json:"step"`
	// Params are the run's parameter values.
	Params map[string]string `json:"params,omitempty"`
	// Upstream are the results of the steps that have succeeded, by name.
	Upstream map[string]StepResult `json:"upstream,omitempty"`
	// Outcome is, for an onExit step, how the run's steps ended.
	Outcome *RunOutcome `json:"outcome,omitempty"`
}

// BuildStepJobResult is a step's job, ready to start.
type BuildStepJobResult struct {
	Job schemas.TrainingJob `json:"job"`
	// Experiment is, for an experiment step, its Experiment (Job is then empty).
	Experiment *schemas.Experiment `json:"experiment,omitempty"`
	// Outputs are the step's outputs known before it runs: its declared outputs, job
	// and checkpointURI.
	Outputs map[string]string `json:"outputs,omitempty"`
	// LabelKeywords are the job's labels as sorted "key=value" (the DlcLabels search
	// attribute).
	LabelKeywords []string `json:"labelKeywords,omitempty"`
	// Children are, for a fan-out step (withItems, withParam), its child jobs, one per
	// item in item order (Job is then empty; each child's Outputs are its own).
	Children []BuildStepJobResult `json:"children,omitempty"`
}

// ErrTypeInvalidStep is the error type of a pipeline step's job cannot be built (a reference with no value,
// an invalid result). Retrying will not help.
const ErrTypeInvalidStep = "InvalidStep"

// BuildStepJob substitutes a job step's references (${params.*}, ${pipeline.*},
// ${steps.<step>.outputs.*}, ${steps.<step>.metrics.*}), names the job <run>-<step>,
// labels it with the run and step, applies the job defaults and validates it. It does no
// I/O; the Pipeline workflow runs it as a local activity so that its result is recorded
// and a later change of these rules cannot change a running pipeline's history.
func (a *PipelineActivities) BuildStepJob(_ context.Context, in BuildStepJobInput) (BuildStepJobResult, error) {
	fail := func(format string, args ...any) (BuildStepJobResult, error) {
		msg := fmt.Sprintf(format, args...)
		return BuildStepJobResult{}, temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalidStep, nil)
	}
	if in.Step.Job == nil && in.Step.Experiment == nil {
		return fail("step %s has no job", in.Step.Name)
	}
	resolve := func(r schemas.TemplateRef) (string, error) {
		switch r.Root {
		case schemas.RefParams:
			if v, ok := in.Params[r.Name]; ok {
				return v, nil
			}
			return "", fmt.Errorf("%s: no such parameter", r)
		case schemas.RefPipeline:
			switch r.Name {
			case "workspace":
				return in.Run.Workspace, nil
			case "name":
				return in.Run.Name, nil
			}
			return in.Outcome.value(r)
		case schemas.RefSteps:
			up, ok := in.Upstream[r.Name]
			if !ok {
				return "", fmt.Errorf("%s: step %s has not succeeded", r, r.Name)
			}
			if r.Field == schemas.StepMetrics {
				if v, ok := up.Metrics[r.Key]; ok {
					return strconv.FormatFloat(v, 'g', -1, 64), nil
				}
				return "", fmt.Errorf("%s: step %s's job did not report %q", r, r.Name, r.Key)
			}
			if v, ok := up.Outputs[r.Key]; ok && v != "" {
				return v, nil
			}
			if r.Key == schemas.OutputCheckpoint {
				return "", fmt.Errorf("%s: step %s's job saved no complete checkpoint", r, r.Name)
			}
			return "", fmt.Errorf("%s: step %s has no output %q", r, r.Name, r.Key)
		}
		return "", fmt.Errorf("%s: not available in a pipeline", r)
	}
	if in.Step.Experiment != nil {
		return buildStepExperiment(in, resolve, fail)
	}

	if in.Step.FanOut() {
		return buildFanOut(in, resolve, fail)
	}
	return buildJob(in, schemas.StepJobName(in.Run.Name, in.Step.Name), nil, resolve, fail)
}

// buildJob builds the job name of a job step; item is, for a fan-out step's child, its
// item (${item} is then a reference).
func buildJob(in BuildStepJobInput, name string, item *fanOutItem, resolve func(schemas.TemplateRef) (string, error),
	fail func(string, ...any) (BuildStepJobResult, error),
) (BuildStepJobResult, error) {
	expand, substitute := schemas.ExpandTemplate, schemas.SubstituteJob
	if item != nil {
		expand, substitute = schemas.ExpandItemTemplate, schemas.SubstituteItemJob
		outer := resolve
		resolve = func(r schemas.TemplateRef) (string, error) {
			if r.Root == schemas.RefItem {
				return schemas.ItemValue(item.value, r.Key)
			}
			return outer(r)
		}
	}
	spec := schemas.CopyJobSpec(in.Step.Job)
	var errs []string
	// Values go into arguments and environment values, never through a shell's parser.
	for _, err := range substitute(&spec, schemas.NewPath("job"), resolve) {
		errs = append(errs, err.Error())
	}
	outputs := map[string]string{schemas.OutputJob: name}
	if spec.Checkpoint != nil {
		outputs[schemas.OutputCheckpointURI] = spec.Checkpoint.URI
	}
	keys := make([]string, 0, len(in.Step.Outputs))
	for k := range in.Step.Outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, err := expand(in.Step.Outputs[k], resolve)
		if err == nil {
			err = schemas.CheckTemplateValue("outputs."+k, s)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("outputs.%s: %v", k, err))
			continue
		}
		outputs[k] = s
		spec.Env = backend.MergeEnv(spec.Env, []schemas.EnvVar{{Name: "DLC_OUTPUT_" + backend.EnvName(k), Value: s}})
	}
	if len(errs) > 0 {
		return fail("step %s: %s", in.Step.Name, strings.Join(errs, "; "))
	}

	labels := make(map[string]string, len(in.Run.Labels)+3)
	maps.Copy(labels, in.Run.Labels)
	labels[schemas.LabelPipeline] = in.Run.Name
	labels[schemas.LabelPipelineStep] = in.Step.Name
	if item != nil {
		labels[schemas.LabelPipelineItem] = strconv.Itoa(item.index)
	}
	job := schemas.TrainingJob{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindTrainingJob,
		Metadata:   schemas.ObjectMeta{Name: name, Workspace: in.Run.Workspace, Labels: labels},
		Spec:       spec,
	}
	job.Default()
	if verrs := job.Validate(); len(verrs) > 0 {
		msgs := make([]string, len(verrs))
		for i, e := range verrs {
			msgs[i] = e.Error()
		}
		return fail("step %s: the job is invalid once its references are substituted: %s", in.Step.Name, strings.Join(msgs, "; "))
	}
	kw := make([]string, 0, len(labels))
	for k, v := range labels {
		kw = append(kw, k+"="+v)
	}
	sort.Strings(kw)
	return BuildStepJobResult{Job: job, Outputs: outputs, LabelKeywords: kw}, nil
}

// fanOutItem is one item of a fan-out step.
type fanOutItem struct {
	index int
	value any
}

// buildFanOut builds a fan-out step's children: its list (withItems, or withParam's
// value, which must be a JSON list), then one job <run>-<step>-<i> per item.
func buildFanOut(in BuildStepJobInput, resolve func(schemas.TemplateRef) (string, error),
	fail func(string, ...any) (BuildStepJobResult, error),
) (BuildStepJobResult, error) {
	items := in.Step.WithItems
	if in.Step.WithParam != "" {
		v, err := schemas.ExpandTemplate(in.Step.WithParam, resolve)
		if err != nil {
			return fail("step %s: withParam: %v", in.Step.Name, err)
		}
		if items, err = schemas.ParseItemList(v); err != nil {
			return fail("step %s: withParam %s: %v", in.Step.Name, in.Step.WithParam, err)
		}
	}
	if len(items) == 0 || len(items) > schemas.MaxFanOutItems {
		return fail("step %s: %d items; a fan-out takes 1 to %d", in.Step.Name, len(items), schemas.MaxFanOutItems)
	}
	out := BuildStepJobResult{Children: make([]BuildStepJobResult, 0, len(items))}
	for i, it := range items {
		name := schemas.StepItemJobName(in.Run.Name, in.Step.Name, i)
		child, err := buildJob(in, name, &fanOutItem{index: i, value: it}, resolve, fail)
		if err != nil {
			if ae, ok := errors.AsType[*temporal.ApplicationError](err); ok {
				return fail("item %d: %s", i, ae.Message())
			}
			return BuildStepJobResult{}, err
		}
		out.Children = append(out.Children, child)
	}
	return out, nil
}
