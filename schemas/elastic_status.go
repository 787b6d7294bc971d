package schemas

// ElasticStatus is the replica count of a running elastic job.
type ElasticStatus struct {
	// DesiredReplicas is the replica count asked for: the spec's at the start, then
	// the last `dlc job scale`.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentReplicas is the replica count of the running gang.
	CurrentReplicas int32 `json:"currentReplicas"`
	// Replacements counts the lost replicas replaced alone, the others running on.
	// Each also counts as a restart (status.restarts, within maxRestarts).
	Replacements int `json:"replacements,omitempty"`
}

// ConditionScaled is the last elastic change of a running job: a scale (reason Scaled,
// or ScaleFailed with status False) or a lost replica replaced alone (ReplicaReplaced).
const ConditionScaled ConditionType = "Scaled"
