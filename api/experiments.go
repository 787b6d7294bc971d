package api

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// ExperimentDetail is an HPO experiment as the API returns it: the spec as submitted
// and the live status, every trial included.
type ExperimentDetail struct {
	// UID tells apart experiments that had the same name at different times.
	UID    string                   `json:"uid"`
	Spec   schemas.Experiment       `json:"spec"`
	Status schemas.ExperimentStatus `json:"status"`
}

// ExperimentSummary is one row of an experiment list.
type ExperimentSummary struct {
	Name      string                  `json:"name"`
	Workspace string                  `json:"workspace"`
	UID       string                  `json:"uid"`
	Phase     schemas.ExperimentPhase `json:"phase"`
	StartTime time.Time               `json:"startTime"`
	EndTime   *time.Time              `json:"endTime,omitempty"`
}

// ExperimentList is a page of experiments.
type ExperimentList struct {
	Items []ExperimentSummary `json:"items"`
	// NextPageToken fetches the next page; empty on the last one.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// ExperimentActionResult is returned by stop, resume and extend: the experiment's phase
// and trial limit once the request was handled.
type ExperimentActionResult struct {
	Phase     schemas.ExperimentPhase `json:"phase"`
	MaxTrials int                     `json:"maxTrials"`
}

// ExtendRequest raises an experiment's maxTrials.
type ExtendRequest struct {
	MaxTrials int `json:"maxTrials"`
}

// EnqueueRequest asks an experiment to run these parameter sets as its next trials,
// before the algorithm's suggestions. Each gives every search-space parameter: a number
// (or numeric string) for int and float parameters, one of the values of a categorical
// one. They count towards maxTrials.
type EnqueueRequest struct {
	Trials []map[string]any `json:"trials"`
}

// CodeFailedPrecondition means the request is valid but the object's state does not allow
// it now (resume or extend a finished experiment).
const CodeFailedPrecondition = "FailedPrecondition"

// ResumeRequest asks a Stopped experiment to carry on.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
}
