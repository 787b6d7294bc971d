package workflows

// Checkpoint retention: once a job has succeeded, its checkpoints are pruned to
// spec.checkpoint.keep.
const (
	// ActivityPruneCheckpoints deletes a succeeded job's checkpoints beyond the newest
	// spec.checkpoint.keep (activities.PruneCheckpointsInput →
	// activities.PruneCheckpointsResult).
	ActivityPruneCheckpoints = "PruneCheckpoints"
)
