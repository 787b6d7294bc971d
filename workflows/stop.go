package workflows

import "github.com/opendlc/opendlc/schemas"

// The stop update (UpdateStop) of jobs, experiments and pipelines.

// StopRequest asks a job (an experiment, a pipeline run) to stop.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StopResult is the job's phase once the stop has been handled.
type StopResult struct {
	Phase schemas.JobPhase `json:"phase"`
}
