package schemas

import (
	"time"

	"github.com/opendlc/opendlc/schedule"
)

// KindSchedule is the kind of a Schedule document.
const KindSchedule Kind = "Schedule"

// Defaults of a Schedule that Default fills in.
const (
	// DefaultOverlapPolicy drops a run that is due while the previous one still runs.
	DefaultOverlapPolicy = schedule.Skip
	// DefaultCatchupWindow is how late a run may start after downtime: one hour.
	DefaultCatchupWindow = Duration(time.Hour)
	// DefaultScheduleHistoryLimit is how many runs a schedule remembers.
	DefaultScheduleHistoryLimit = 50
)

// Schedule runs an action — a training job, an experiment or a pipeline — at the times a
// cron expression names, in a time zone: periodic retraining. Each schedule is one
// durable workflow; each run it starts is an ordinary job, experiment or pipeline run
// named <schedule>-<UTC nominal time>, labelled opendlc.io/schedule=<schedule>.
type Schedule struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be Schedule.
	Kind Kind `json:"kind"`
	// Metadata names the schedule and its workspace; the name is at most 35 characters,
	// so that run names (the name, '-' and 14 digits) fit in 50.
	Metadata ObjectMeta `json:"metadata"`
	// Spec says when to run what.
	Spec ScheduleSpec `json:"spec"`
}

// ScheduleSpec is when a schedule fires, what each run starts, and how runs that overlap,
// are missed or find no new data are handled.
type ScheduleSpec struct {
	// Cron is when to run: five fields ("0 2 * * *", minute hour day-of-month month
	// day-of-week), six with a leading seconds field ("*/30 * * * * *"), or a descriptor:
	// @yearly, @monthly, @weekly, @daily, @hourly, "@every 6h". See docs/schedules.md for
	// daylight-saving behaviour.
	Cron string `json:"cron" jsonschema:"maxLength=256"`
	// TimeZone is the IANA zone the expression is read in, such as Asia/Shanghai; default
	// UTC.
	TimeZone string `json:"timeZone,omitempty" jsonschema:"maxLength=64"`
	// StartTime, when set, is the earliest time that fires (RFC 3339).
	StartTime *time.Time `json:"startTime,omitempty"`
	// EndTime, when set, is the latest time that fires (RFC 3339).
	EndTime *time.Time `json:"endTime,omitempty"`
	// Jitter delays each run by a fixed offset below this duration, derived from the
	// schedule's name and the run's time, so that many schedules at 02:00 spread out. At
	// most 24h; default none.
	Jitter Duration `json:"jitter,omitempty"`
	// OverlapPolicy says what happens to a run that is due while earlier runs still run:
	// skip (default), bufferOne, bufferAll, cancelOther or allowAll.
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty" jsonschema:"enum=skip,enum=bufferOne,enum=bufferAll,enum=cancelOther,enum=allowAll"`
	// CatchupWindow is how late a run may still start when the control plane was down at
	// its time; older missed runs are recorded as Missed. Each missed run inside the window
	// runs once. From 10s to 365 days; default 1h.
	CatchupWindow Duration `json:"catchupWindow,omitempty"`
	// Paused stops scheduled runs (trigger and backfill still work); times that pass while
	// paused are not caught up.
	Paused bool `json:"paused,omitempty"`
	// PauseNote says why the schedule is paused.
	PauseNote string `json:"pauseNote,omitempty" jsonschema:"maxLength=1024"`
	// HistoryLimit is how many past runs the schedule remembers, up to 1000; default 50.
	HistoryLimit int32 `json:"historyLimit,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// Action is what each run starts.
	Action ScheduleAction `json:"action"`
	// RunOptions change how each run starts.
	RunOptions ScheduleRunOptions `json:"runOptions,omitempty,omitzero"`
}

// ScheduleAction is what each run of a schedule starts. Exactly one template is set.
//
// Extension point: a new action is one more template field here, one entry in
// ScheduleAction.templates and ScheduleAction.Kind, and a case in the Schedule
// workflow's start step.
type ScheduleAction struct {
	// JobTemplate starts a TrainingJob.
	JobTemplate *JobTemplate `json:"jobTemplate,omitempty"`
	// ExperimentTemplate starts an Experiment (a hyper-parameter search).
	ExperimentTemplate *ExperimentTemplate `json:"experimentTemplate,omitempty"`
	// PipelineTemplate starts a Pipeline run.
	PipelineTemplate *PipelineTemplate `json:"pipelineTemplate,omitempty"`
	// PipelineTemplateRef starts a Pipeline run of a stored PipelineTemplate of the
	// schedule's workspace, named instead of embedded: each run runs the template as it
	// is when the run starts. A template that is missing then, or that the run cannot
	// run (its params, the run's name), makes the run StartFailed.
	PipelineTemplateRef *SchedulePipelineTemplateRef `json:"pipelineTemplateRef,omitempty"`
}

// SchedulePipelineTemplateRef names the stored PipelineTemplate each run of a schedule
// runs, and the values of its parameters.
type SchedulePipelineTemplateRef struct {
	// Name is the template's name, in the schedule's workspace.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Params are the values of the template's parameters for every run, as
	// `dlc template run -p NAME=VALUE` gives them; parameters not given take their
	// defaults. They are checked against the template when each run starts.
	Params map[string]string `json:"params,omitempty"`
}

// Kind is the kind of what each run starts: TrainingJob, Experiment or Pipeline; empty
// when no template is set.
func (a *ScheduleAction) Kind() Kind {
	switch {
	case a.JobTemplate != nil:
		return KindTrainingJob
	case a.ExperimentTemplate != nil:
		return KindExperiment
	case a.PipelineTemplate != nil, a.PipelineTemplateRef != nil:
		return KindPipeline
	}
	return ""
}

// JobTemplate is the TrainingJob each run starts: its name and workspace come from the
// schedule, its labels and annotations from here plus opendlc.io/schedule.
type JobTemplate struct {
	// Metadata holds the labels and annotations of every run's job.
	Metadata TemplateMeta `json:"metadata,omitempty,omitzero"`
	// Spec is the job's spec, as in a TrainingJob document.
	Spec TrainingJobSpec `json:"spec"`
}

// ExperimentTemplate is the Experiment each run starts: its name and workspace come from
// the schedule, its labels and annotations from here plus opendlc.io/schedule (which its
// trial jobs carry too).
type ExperimentTemplate struct {
	// Metadata holds the labels and annotations of every run's experiment.
	Metadata TemplateMeta `json:"metadata,omitempty,omitzero"`
	// Spec is the experiment's spec, as in an Experiment document.
	Spec ExperimentSpec `json:"spec"`
}

// PipelineTemplate is the Pipeline each run starts: its name and workspace come from the
// schedule (so ${pipeline.name} is the run's name), its labels and annotations from here
// plus opendlc.io/schedule (which its steps' jobs carry too).
type PipelineTemplate struct {
	// Metadata holds the labels and annotations of every run's pipeline.
	Metadata TemplateMeta `json:"metadata,omitempty,omitzero"`
	// Params are the values of the pipeline's parameters for every run, as
	// `dlc pipeline run -p NAME=VALUE` gives them; parameters not given take their
	// defaults.
	Params map[string]string `json:"params,omitempty"`
	// Spec is the pipeline's spec, as in a Pipeline document.
	Spec PipelineSpec `json:"spec"`
}

// TemplateMeta is the part of a template's metadata a user may set.
type TemplateMeta struct {
	// Labels are added to every run's job.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to every run's job.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ScheduleRunOptions change how each run starts.
type ScheduleRunOptions struct {
	// ResumeFromPreviousCheckpoint starts each run from the latest checkpoint the previous
	// run recorded (its status' lastCheckpoint), through spec.checkpoint.resumeFrom and so
	// DLC_RESUME_FROM. The job template must set spec.checkpoint; it applies to
	// jobTemplate only. The first run, and runs after runs without a checkpoint, start
	// fresh.
	ResumeFromPreviousCheckpoint bool `json:"resumeFromPreviousCheckpoint,omitempty"`
	// SkipIfNoNewDataUnder is s3://bucket/prefix: a run whose time comes is skipped
	// (recorded as NoNewData) unless an object under it was modified after the previous
	// run started. The first run always starts.
	SkipIfNoNewDataUnder string `json:"skipIfNoNewDataUnder,omitempty" jsonschema:"maxLength=1024"`
}

// templates lists the action's templates that are set, by field name.
func (a *ScheduleAction) templates() []string {
	var set []string
	if a.JobTemplate != nil {
		set = append(set, "jobTemplate")
	}
	if a.ExperimentTemplate != nil {
		set = append(set, "experimentTemplate")
	}
	if a.PipelineTemplate != nil {
		set = append(set, "pipelineTemplate")
	}
	if a.PipelineTemplateRef != nil {
		set = append(set, "pipelineTemplateRef")
	}
	return set
}

// Times returns the schedule's fire times (package schedule's view of the spec). Errors
// wrap the schedule package's sentinels; a valid spec has none.
func (s *Schedule) Times() (*schedule.Schedule, error) {
	sp := schedule.Spec{Name: s.Metadata.Name, Cron: s.Spec.Cron, TimeZone: s.Spec.TimeZone, Jitter: s.Spec.Jitter.D()}
	if s.Spec.StartTime != nil {
		sp.Start = *s.Spec.StartTime
	}
	if s.Spec.EndTime != nil {
		sp.End = *s.Spec.EndTime
	}
	return schedule.Parse(sp)
}

// ScheduleStatus is a schedule's live state, as the API returns it.
type ScheduleStatus struct {
	// Paused and PauseNote mirror spec.paused and spec.pauseNote.
	Paused    bool   `json:"paused"`
	PauseNote string `json:"pauseNote,omitempty"`
	// CreateTime is when the schedule was created.
	CreateTime time.Time `json:"createTime"`
	// Next are the next fire times (none while paused or after endTime).
	Next []ScheduledTime `json:"next,omitempty"`
	// Running are the runs whose job, experiment or pipeline still runs.
	Running []ScheduleRun `json:"running,omitempty"`
	// Buffered are runs waiting for the running ones to finish (overlap policy).
	Buffered []ScheduleRun `json:"buffered,omitempty"`
	// History are the most recent runs, oldest first, at most spec.historyLimit.
	History []ScheduleRun `json:"history,omitempty"`
	// LastCheckpoint is the newest checkpoint a finished run recorded.
	LastCheckpoint string `json:"lastCheckpoint,omitempty"`
	// Counts of runs by what happened to them, since the schedule was created.
	Counts ScheduleCounts `json:"counts"`
}

// ScheduledTime is one upcoming fire time.
type ScheduledTime struct {
	// NominalTime is the time the cron expression names.
	NominalTime time.Time `json:"nominalTime"`
	// FireTime is when the run starts: the nominal time plus the jitter.
	FireTime time.Time `json:"fireTime"`
}

// ScheduleCounts counts a schedule's runs by outcome.
type ScheduleCounts struct {
	Started   int64 `json:"started"`
	Skipped   int64 `json:"skipped"`
	Missed    int64 `json:"missed"`
	NoNewData int64 `json:"noNewData"`
}

// RunOutcome is what became of one run of a schedule.
type RunOutcome string

// Run outcomes.
const (
	// RunRunning: the run's job, experiment or pipeline runs.
	RunRunning RunOutcome = "Running"
	// RunBuffered: the run waits for running runs to finish.
	RunBuffered RunOutcome = "Buffered"
	// RunSucceeded, RunFailed, RunStopped: the job, experiment or pipeline ended in that
	// phase. An experiment the schedule stopped (overlap policy cancelOther) counts as
	// Stopped once its trials have stopped, though it could still be resumed.
	RunSucceeded RunOutcome = "Succeeded"
	RunFailed    RunOutcome = "Failed"
	RunStopped   RunOutcome = "Stopped"
	// RunSkipped: dropped by the overlap policy.
	RunSkipped RunOutcome = "Skipped"
	// RunMissed: the control plane was down at its time for longer than the catch-up
	// window.
	RunMissed RunOutcome = "Missed"
	// RunNoNewData: skipped because nothing new arrived under runOptions.skipIfNoNewDataUnder.
	RunNoNewData RunOutcome = "NoNewData"
	// RunStartFailed: the job, experiment or pipeline could not be started.
	RunStartFailed RunOutcome = "StartFailed"
	// RunUnknown: the run's end could not be learnt (it was deleted).
	RunUnknown RunOutcome = "Unknown"
)

// RunTrigger says why a run happened.
type RunTrigger string

// Run triggers.
const (
	TriggerSchedule RunTrigger = "Schedule"
	TriggerCatchup  RunTrigger = "Catchup"
	TriggerManual   RunTrigger = "Trigger"
	TriggerBackfill RunTrigger = "Backfill"
)

// ScheduleRun is one run of a schedule.
type ScheduleRun struct {
	// NominalTime is the time the run stands for.
	NominalTime time.Time `json:"nominalTime"`
	// Trigger says why it ran: Schedule, Catchup, Trigger or Backfill.
	Trigger RunTrigger `json:"trigger"`
	// Kind is what the run starts: TrainingJob (also when empty, in runs recorded before
	// schedules started anything else), Experiment or Pipeline.
	Kind Kind `json:"kind,omitempty"`
	// Job is the name of the run's job, experiment or pipeline run, as Kind says (empty
	// when none was started).
	Job string `json:"job,omitempty"`
	// StartTime is when the job was started.
	StartTime *time.Time `json:"startTime,omitempty"`
	// FinishTime is when the run's outcome became known.
	FinishTime *time.Time `json:"finishTime,omitempty"`
	// Outcome is what became of the run.
	Outcome RunOutcome `json:"outcome"`
	// Message explains the outcome.
	Message string `json:"message,omitempty"`
	// Checkpoint is the latest checkpoint the run's job recorded.
	Checkpoint string `json:"checkpoint,omitempty"`
	// ResumedFrom is the checkpoint the job started from.
	ResumedFrom string `json:"resumedFrom,omitempty"`
}
