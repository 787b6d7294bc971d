package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// ErrTypeNoDataSource is the error type of a schedule that asks for a data check but the worker has no S3 access.
const ErrTypeNoDataSource = "NoDataSource"

// ObjectLister finds objects under an S3 prefix (checkpoint.Store implements it).
type ObjectLister interface {
	// FirstModifiedAfter returns the first object under uri (s3://bucket/prefix) modified
	// strictly after t; found is false when there is none.
	FirstModifiedAfter(ctx context.Context, uri string, t time.Time) (key string, modified time.Time, found bool, err error)
}

// JobControl follows and stops what a schedule's runs started — jobs, experiments and
// pipeline runs — by their workflow id (the worker's Temporal client implements it).
type JobControl interface {
	// WaitJob waits until the run's workflow is closed and returns how it ended.
	WaitJob(ctx context.Context, workflowID string) (JobOutcome, error)
	// StopJob sends the run's workflow its stop update and returns the phase it answered
	// with once the update completed: a job or pipeline answers once terminal, an
	// experiment once Stopped (it may still be resumed). A run that has already ended
	// is not an error; the phase is then empty.
	StopJob(ctx context.Context, workflowID, reason string) (phase string, err error)
}

// JobOutcome is how a job, an experiment or a pipeline run ended.
type JobOutcome struct {
	// Found is false when the job no longer exists (it was deleted).
	Found bool `json:"found"`
	// Phase is the terminal phase. Experiments and pipelines name theirs like jobs:
	// Succeeded, Failed, Stopped.
	Phase schemas.JobPhase `json:"phase,omitempty"`
	// LastCheckpoint is the newest checkpoint the job recorded.
	LastCheckpoint string `json:"lastCheckpoint,omitempty"`
	// Message explains the phase.
	Message string `json:"message,omitempty"`
}

// ScheduleActivities are the activities of the Schedule workflow.
type ScheduleActivities struct {
	// Objects lists S3 prefixes for runOptions.skipIfNoNewDataUnder.
	Objects ObjectLister
	// Jobs follows runs started by an earlier run of the schedule workflow (before
	// continue-as-new) and stops runs for the cancelOther overlap policy, whatever they
	// started.
	Jobs JobControl
	// Templates reads the stored pipeline templates that schedules name
	// (spec.action.pipelineTemplateRef).
	Templates PipelineTemplateReader
	// Storage, when set, confines the S3 URIs of a run made from a stored template to the
	// schedule's workspace's locations, as the API checks a run it starts.
	Storage StorageLocations
}

// CheckNewDataInput asks whether data arrived under a prefix.
type CheckNewDataInput struct {
	// URI is s3://bucket/prefix.
	URI string `json:"uri"`
	// Since: only objects modified after it count.
	Since time.Time `json:"since"`
}

// CheckNewDataResult says whether new data arrived, and names one new object.
type CheckNewDataResult struct {
	Found    bool      `json:"found"`
	Key      string    `json:"key,omitempty"`
	Modified time.Time `json:"modified,omitzero"`
}

// CheckNewData reports whether an object under in.URI was modified after in.Since.
func (a *ScheduleActivities) CheckNewData(ctx context.Context, in CheckNewDataInput) (CheckNewDataResult, error) {
	defer keepAlive(ctx)()
	if a.Objects == nil {
		return CheckNewDataResult{}, temporal.NewNonRetryableApplicationError(
			"this worker has no S3 configuration to check for new data", ErrTypeNoDataSource, nil)
	}
	key, mod, found, err := a.Objects.FirstModifiedAfter(ctx, in.URI, in.Since)
	if err != nil {
		return CheckNewDataResult{}, err
	}
	return CheckNewDataResult{Found: found, Key: key, Modified: mod}, nil
}

// WaitScheduledJobInput names the workflow of a job, an experiment or a pipeline run.
type WaitScheduledJobInput struct {
	WorkflowID string `json:"workflowId"`
}

// WaitScheduledJob waits until a job, an experiment or a pipeline run has ended and
// returns its outcome.
func (a *ScheduleActivities) WaitScheduledJob(ctx context.Context, in WaitScheduledJobInput) (JobOutcome, error) {
	defer keepAlive(ctx)()
	if a.Jobs == nil {
		return JobOutcome{}, errors.New("activities: no job control configured")
	}
	return a.Jobs.WaitJob(ctx, in.WorkflowID)
}

// StopScheduledJobInput names the job, experiment or pipeline run to stop and says why.
type StopScheduledJobInput struct {
	WorkflowID string `json:"workflowId"`
	Reason     string `json:"reason,omitempty"`
}

// StopScheduledJobResult is the phase the stopped run answered with; empty when it had
// already ended.
type StopScheduledJobResult struct {
	Phase string `json:"phase,omitempty"`
}

// StopScheduledJob stops a job or a pipeline run and returns once it is terminal, or an
// experiment and returns once it is Stopped.
func (a *ScheduleActivities) StopScheduledJob(ctx context.Context, in StopScheduledJobInput) (StopScheduledJobResult, error) {
	defer keepAlive(ctx)()
	if a.Jobs == nil {
		return StopScheduledJobResult{}, errors.New("activities: no job control configured")
	}
	phase, err := a.Jobs.StopJob(ctx, in.WorkflowID, in.Reason)
	return StopScheduledJobResult{Phase: phase}, err
}

// ErrTypeNoTemplates is the error type of a schedule that names a stored pipeline
// template on a worker that cannot read them.
const ErrTypeNoTemplates = "NoPipelineTemplates"

// PipelineTemplateReader reads stored PipelineTemplates (the templates store, through
// the worker).
type PipelineTemplateReader interface {
	// GetPipelineTemplate returns the template name of workspace ws; found is false when
	// the workspace has none of that name.
	GetPipelineTemplate(ctx context.Context, ws, name string) (tpl *schemas.StoredPipelineTemplate, found bool, err error)
}

// ResolvePipelineTemplateInput is one run of a schedule that names a stored pipeline
// template: the template, and the run's name, metadata and parameter values.
type ResolvePipelineTemplateInput struct {
	// Workspace is the schedule's: the template is looked up there and nowhere else.
	Workspace string `json:"workspace"`
	// Template is the template's name.
	Template string `json:"template"`
	// Run is the run's name.
	Run string `json:"run"`
	// Labels and Annotations are added to the template's on the run.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Params are the schedule's parameter values.
	Params map[string]string `json:"params,omitempty"`
}

// ResolvePipelineTemplateResult is the Pipeline the run starts and its resolved
// parameters, or why it cannot start (Problem).
type ResolvePipelineTemplateResult struct {
	// Problem, when set, says why no run can start: the template is missing, or the
	// run it makes is invalid. It is no error: a retry would say the same.
	Problem  string            `json:"problem,omitempty"`
	Pipeline schemas.Pipeline  `json:"pipeline,omitzero"`
	Params   map[string]string `json:"params,omitempty"`
}

// ResolvePipelineTemplate reads the template as it is now and makes the run's Pipeline
// from it, checked as the API checks a run of a template: its spec with the run's
// name, and the parameter values. The workflow records the result, so a replay runs
// the template as it was at this fire.
func (a *ScheduleActivities) ResolvePipelineTemplate(ctx context.Context, in ResolvePipelineTemplateInput) (ResolvePipelineTemplateResult, error) {
	if a.Templates == nil {
		return ResolvePipelineTemplateResult{}, temporal.NewNonRetryableApplicationError(
			"this worker cannot read stored pipeline templates", ErrTypeNoTemplates, nil)
	}
	tpl, found, err := a.Templates.GetPipelineTemplate(ctx, in.Workspace, in.Template)
	if err != nil {
		return ResolvePipelineTemplateResult{}, err
	}
	if !found || tpl.Metadata.Workspace != in.Workspace {
		return ResolvePipelineTemplateResult{Problem: fmt.Sprintf("pipeline template %q not found in workspace %s", in.Template, in.Workspace)}, nil
	}
	p := tpl.Run(in.Run)
	if p.Metadata.Labels == nil && len(in.Labels) > 0 {
		p.Metadata.Labels = map[string]string{}
	}
	maps.Copy(p.Metadata.Labels, in.Labels)
	maps.Copy(p.Metadata.Annotations, in.Annotations)
	if errs := p.Validate(); len(errs) > 0 {
		return ResolvePipelineTemplateResult{Problem: fmt.Sprintf("pipeline template %q makes an invalid run: %s", in.Template, strings.ReplaceAll(errs.Error(), "\n", "; "))}, nil
	}
	values, errs := p.Spec.ResolveParams(in.Params)
	if len(errs) > 0 {
		return ResolvePipelineTemplateResult{Problem: fmt.Sprintf("pipeline template %q does not take the schedule's params: %s", in.Template, strings.ReplaceAll(errs.Error(), "\n", "; "))}, nil
	}
	if a.Storage != nil {
		locs, err := a.Storage.Locations(ctx, in.Workspace)
		if err != nil {
			return ResolvePipelineTemplateResult{}, err
		}
		if errs := storage.Check(&p, locs); len(errs) > 0 {
			return ResolvePipelineTemplateResult{Problem: fmt.Sprintf("pipeline template %q names storage outside workspace %s: %s",
				in.Template, in.Workspace, strings.ReplaceAll(errs.Error(), "\n", "; "))}, nil
		}
	}
	return ResolvePipelineTemplateResult{Pipeline: p, Params: values}, nil
}
