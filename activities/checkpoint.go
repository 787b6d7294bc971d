package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/checkpoint"
)

// CheckpointPruner is implemented by a JobActivities.Checkpoints that can also delete
// old checkpoints (the checkpoint store's Prune); without it, PruneCheckpoints does
// nothing.
type CheckpointPruner interface {
	// Prune deletes the oldest complete checkpoints under uri so that keep remain, and
	// the incomplete steps older than the newest complete one; it returns the deleted
	// steps, oldest first.
	Prune(ctx context.Context, uri string, keep int) ([]int64, error)
}

// PruneCheckpointsInput names a job's checkpoint location and how many complete
// checkpoints to retain (spec.checkpoint.keep).
type PruneCheckpointsInput struct {
	URI  string `json:"uri"`
	Keep int    `json:"keep"`
	// Workspace is the job's workspace: with JobActivities.Storage, only a URI inside
	// its locations is pruned.
	Workspace string `json:"workspace,omitempty"`
}

// PruneCheckpointsResult lists the steps PruneCheckpoints deleted.
type PruneCheckpointsResult struct {
	Deleted []int64 `json:"deleted,omitempty"`
}

// PruneCheckpoints applies a succeeded job's checkpoint retention: the newest Keep
// complete checkpoints stay, older ones and dead partial saves go, whether or not the
// training code pruned them itself. Keep <= 0 keeps everything. Pruning is idempotent:
// a retried call deletes what the first left.
func (a *JobActivities) PruneCheckpoints(ctx context.Context, in PruneCheckpointsInput) (PruneCheckpointsResult, error) {
	defer keepAlive(ctx)()
	p, ok := a.Checkpoints.(CheckpointPruner)
	if !ok || in.URI == "" || in.Keep <= 0 {
		return PruneCheckpointsResult{}, nil
	}
	if err := a.checkPruneStorage(ctx, in); err != nil {
		return PruneCheckpointsResult{}, err
	}
	deleted, err := p.Prune(ctx, in.URI, in.Keep)
	if err != nil {
		err = fmt.Errorf("prune checkpoints under %s to %d: %w", in.URI, in.Keep, err)
		if errors.Is(err, checkpoint.ErrInvalidURI) {
			return PruneCheckpointsResult{Deleted: deleted}, invalidSpec(err)
		}
		return PruneCheckpointsResult{Deleted: deleted}, err
	}
	if len(deleted) > 0 {
		activity.GetLogger(ctx).Info("pruned checkpoints", "uri", in.URI, "keep", in.Keep, "steps", deleted)
	}
	return PruneCheckpointsResult{Deleted: deleted}, nil
}
