package api

import (
	"time"

	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// ScheduleView is a schedule as the API returns it: its spec and live status (next fire
// times, runs still running or waiting, history).
type ScheduleView struct {
	Spec   schemas.Schedule       `json:"spec"`
	Status schemas.ScheduleStatus `json:"status"`
}

// ScheduleSummary is one row of a schedule list.
type ScheduleSummary struct {
	Name       string    `json:"name"`
	Workspace  string    `json:"workspace"`
	Cron       string    `json:"cron"`
	TimeZone   string    `json:"timeZone"`
	Paused     bool      `json:"paused"`
	CreateTime time.Time `json:"createTime"`
}

// ScheduleList is a page of schedules.
type ScheduleList struct {
	Items []ScheduleSummary `json:"items"`
	// NextPageToken fetches the next page; empty on the last one.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// PauseScheduleRequest pauses a schedule's scheduled runs.
type PauseScheduleRequest struct {
	// Note says why; shown by get.
	Note string `json:"note,omitempty"`
}

// TriggerScheduleRequest runs a schedule's action now.
type TriggerScheduleRequest struct {
	// OverlapPolicy overrides the schedule's for this run; allowAll runs it even while
	// another run runs.
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// TriggerScheduleResult is the run the trigger made (or found, when triggered twice in
// one second).
type TriggerScheduleResult struct {
	Run schemas.ScheduleRun `json:"run"`
}

// BackfillScheduleRequest runs each time of [From, To) the schedule's expression names,
// once, ignoring pause and the start and end times.
type BackfillScheduleRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// OverlapPolicy is bufferAll (default: one after another) or allowAll (all at once).
	OverlapPolicy schedule.OverlapPolicy `json:"overlapPolicy,omitempty"`
}

// BackfillScheduleResult lists the backfill's runs as they were dealt with: started,
// waiting, or already run before.
type BackfillScheduleResult struct {
	Runs []schemas.ScheduleRun `json:"runs"`
}
