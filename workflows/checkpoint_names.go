package workflows

// Checkpoint retention: once a job has succeeded, its checkpoints are pruned to
// spec.checkpoint.keep.
const (
	// ActivityPruneCheckpoints deletes a succeeded job's checkpoints beyond the newest
	// spec.checkpoint.keep (activities.PruneCheckpointsInput →
	// activities.PruneCheckpointsResult).
	ActivityPruneCheckpoints = "PruneCheckpoints"

	// changeCheckpointRetention: a job that succeeded with spec.checkpoint.keep > 0 has
	// its checkpoints pruned to keep before it enters Succeeded.
	changeCheckpointRetention = "checkpoint-retention"
)
