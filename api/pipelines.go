package api

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// PipelineRun is a pipeline run as the API returns it: the pipeline as submitted and the
// live status of the run and of each step.
type PipelineRun struct {
	// UID tells apart runs that had the same name at different times.
	UID    string                 `json:"uid"`
	Spec   schemas.Pipeline       `json:"spec"`
	Status schemas.PipelineStatus `json:"status"`
}

// PipelineSummary is one row of a pipeline run list.
type PipelineSummary struct {
	Name      string                `json:"name"`
	Workspace string                `json:"workspace"`
	UID       string                `json:"uid"`
	Phase     schemas.PipelinePhase `json:"phase"`
	StartTime time.Time             `json:"startTime"`
	EndTime   *time.Time            `json:"endTime,omitempty"`
}

// PipelineList is a page of pipeline runs.
type PipelineList struct {
	Items []PipelineSummary `json:"items"`
	// NextPageToken fetches the next page; empty on the last one.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// PipelineStopResult is returned by the stop call once the run is terminal.
type PipelineStopResult struct {
	Phase schemas.PipelinePhase `json:"phase"`
}

// PipelineRetryRequest is the body of the retry call.
type PipelineRetryRequest struct {
	// Name names the retry; default <run>-retry-<N>, the first N free.
	Name string `json:"name,omitempty"`
}
