package api

import "github.com/opendlc/opendlc/schemas"

// ScaleRequest sets a running elastic job's replica count (`dlc job scale`).
type ScaleRequest struct {
	// Replicas is the job's replica count in all roles, within spec.elastic's
	// [minReplicas, maxReplicas].
	Replicas int32 `json:"replicas"`
}

// ScaleResult is the job's replica count once the scale is applied.
type ScaleResult struct {
	DesiredReplicas int32            `json:"desiredReplicas"`
	CurrentReplicas int32            `json:"currentReplicas"`
	Phase           schemas.JobPhase `json:"phase"`
}
