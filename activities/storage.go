package activities

import (
	"context"
	"fmt"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// StorageLocations says where a workspace may store (storage.Policy).
type StorageLocations interface {
	// Locations returns the workspace's S3 locations; nil means unrestricted.
	Locations(ctx context.Context, workspace string) ([]storage.Location, error)
}

// checkJobStorage checks, when the job launches, that every S3 URI of the job and the
// checkpoint it resumes from are inside the workspace's locations as they are now: a
// workspace whose locations changed since the job was submitted, or a URI a template
// parameter filled in, cannot reach another workspace's data. A URI outside is an
// invalid spec (the job fails, nothing is launched); a registry that cannot be read is
// retryable.
func (a *JobActivities) checkJobStorage(ctx context.Context, job *schemas.TrainingJob, resumeFrom string) error {
	if a.Storage == nil {
		return nil
	}
	ws := job.Metadata.Workspace
	locs, err := a.Storage.Locations(ctx, ws)
	if err != nil || locs == nil {
		return err
	}
	errs := storage.Check(job, locs)
	if resumeFrom != "" && !storage.Within(resumeFrom, locs) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("status", "resumeFrom"), "%s is outside the workspace's storage", resumeFrom))
	}
	if len(errs) > 0 {
		return invalidSpec(fmt.Errorf("workspace %s: %w", ws, errs))
	}
	return nil
}

// checkPruneStorage refuses to prune a location that is not inside the job's
// workspace's locations: pruning deletes with the worker's credentials, so it must
// never reach another workspace's checkpoints.
func (a *JobActivities) checkPruneStorage(ctx context.Context, in PruneCheckpointsInput) error {
	if a.Storage == nil {
		return nil
	}
	if in.Workspace == "" {
		return invalidSpec(fmt.Errorf("prune checkpoints under %s: the job's workspace is unknown (a job started before storage checks); nothing pruned", in.URI))
	}
	locs, err := a.Storage.Locations(ctx, in.Workspace)
	if err != nil || locs == nil {
		return err
	}
	if !storage.Within(in.URI, locs) {
		return invalidSpec(fmt.Errorf("prune checkpoints under %s: outside workspace %s's storage; nothing pruned", in.URI, in.Workspace))
	}
	return nil
}

// mayRead reports whether the control plane may read uri on behalf of workspace: true
// without Storage, for a job recorded without its workspace, or for a URI inside the
// workspace's locations.
func (a *JobActivities) mayRead(ctx context.Context, workspace, uri string) (bool, error) {
	if a.Storage == nil || workspace == "" {
		return true, nil
	}
	locs, err := a.Storage.Locations(ctx, workspace)
	if err != nil {
		return false, err
	}
	return locs == nil || storage.Within(uri, locs), nil
}
