package workflows

import "time"

// Wire names of the Schedule workflow (docs/schedules.md). Its status query is QueryStatus
// ("status"), which takes a ScheduleQuery and returns a ScheduleView.
const (
	ScheduleWorkflowName = "Schedule"

	// UpdateSchedulePause pauses scheduled runs (PauseScheduleRequest → ScheduleView).
	UpdateSchedulePause = "pause"
	// UpdateScheduleResume resumes them (ResumeScheduleRequest → ScheduleView).
	UpdateScheduleResume = "resume"
	// UpdateScheduleTrigger runs the action now (TriggerScheduleRequest → TriggerScheduleResult).
	UpdateScheduleTrigger = "trigger"
	// UpdateScheduleBackfill runs every time in a range (BackfillScheduleRequest →
	// BackfillScheduleResult).
	UpdateScheduleBackfill = "backfill"
	// UpdateScheduleSpec replaces the spec (UpdateScheduleRequest → ScheduleView).
	UpdateScheduleSpec = "update"

	ActivityCheckNewData     = "CheckNewData"
	ActivityWaitScheduledJob = "WaitScheduledJob"
	ActivityStopScheduledJob = "StopScheduledJob"
	// ActivityResolvePipelineTemplate reads the stored template a schedule names
	// (spec.action.pipelineTemplateRef) and makes the run's Pipeline from it.
	ActivityResolvePipelineTemplate = "ResolvePipelineTemplate"
)

// Values of the DlcPhase search attribute of a schedule.
const (
	SchedulePhaseActive = "Active"
	SchedulePhasePaused = "Paused"
)

// Memo keys of a schedule's workflow, read by the list call.
const (
	MemoCron     = "cron"
	MemoTimeZone = "timeZone"
)

// ScheduleWorkflowID is the workflow id of a schedule: unique per workspace and name.
func ScheduleWorkflowID(workspace, name string) string {
	return "dlc/" + workspace + "/schedule/" + name
}

// ScheduledJobName is the name of the job a schedule starts for a nominal time:
// <schedule>-<yyyymmddhhmm> in UTC, with the seconds appended when they are not zero
// (<schedule>-<yyyymmddhhmmss>). UTC keeps the name unique across daylight-saving
// changes, where a local wall-clock time can happen twice.
func ScheduledJobName(schedule string, nominal time.Time) string {
	u := nominal.UTC()
	if u.Second() != 0 {
		return schedule + "-" + u.Format("20060102150405")
	}
	return schedule + "-" + u.Format("200601021504")
}
