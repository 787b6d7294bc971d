// Package api holds the types of OpenDLC's JSON-over-HTTP API, shared by the server
// (api/server) and the Go SDK (client). It has no dependencies beyond the domain.
package api

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// Job is a job as the API returns it: its spec as submitted and its live status.
type Job struct {
	// UID tells apart jobs that had the same name at different times.
	UID    string              `json:"uid"`
	Spec   schemas.TrainingJob `json:"spec"`
	Status schemas.JobStatus   `json:"status"`
}

// JobSummary is one row of a job list.
type JobSummary struct {
	Name      string           `json:"name"`
	Workspace string           `json:"workspace"`
	UID       string           `json:"uid"`
	Phase     schemas.JobPhase `json:"phase"`
	// Framework is the job's spec.framework.
	Framework schemas.Framework `json:"framework,omitempty"`
	StartTime time.Time         `json:"startTime"`
	EndTime   *time.Time        `json:"endTime,omitempty"`
}

// JobList is a page of jobs.
type JobList struct {
	Items []JobSummary `json:"items"`
	// NextPageToken fetches the next page; empty on the last one.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// StopResult is returned by the stop call once the job is terminal.
type StopResult struct {
	Phase schemas.JobPhase `json:"phase"`
}

// ValidateResult is returned by the validate call.
type ValidateResult struct {
	Valid  bool              `json:"valid"`
	Errors schemas.ErrorList `json:"errors,omitempty"`
}

// Error codes.
const (
	CodeInvalidSpec     = "InvalidSpec"
	CodeInvalidArgument = "InvalidArgument"
	CodeNotFound        = "NotFound"
	CodeAlreadyExists   = "AlreadyExists"
	CodeTooLarge        = "RequestTooLarge"
	CodeUnavailable     = "Unavailable"
	CodeInternal        = "Internal"
)

// Error is the one error shape of the API: {"error": {...}}.
type Error struct {
	Code    string               `json:"code"`
	Message string               `json:"message"`
	Details []schemas.FieldError `json:"details,omitempty"`
}

// ErrorBody wraps Error on the wire.
type ErrorBody struct {
	Error Error `json:"error"`
}

// RuleList is a workspace's notification rules (secrets redacted).
type RuleList struct {
	Items []schemas.NotificationRule `json:"items"`
}

// CloneRequest creates a new job from an existing one.
type CloneRequest struct {
	// Name is the new job's name (same workspace).
	Name string `json:"name"`
	// Overrides is a JSON merge patch (RFC 7386) applied to the spec document, e.g.
	// {"spec": {"roles": {"worker": {"replicas": 8}}}}.
	Overrides map[string]any `json:"overrides,omitempty"`
}

// StopRequest asks a job, a pipeline run or an experiment to stop.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}
