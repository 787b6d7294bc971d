package auth

import (
	"context"
	"errors"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// maxStorageLocations bounds a workspace's storage.locations.
const maxStorageLocations = 16

// validateStorage checks a workspace's storage locations: each an s3://bucket or
// s3://bucket/prefix without empty, "." or ".." segments.
func validateStorage(st *api.WorkspaceStorage) schemas.ErrorList {
	if st == nil {
		return nil
	}
	var errs schemas.ErrorList
	p := schemas.NewPath("storage", "locations")
	if len(st.Locations) > maxStorageLocations {
		errs = append(errs, schemas.Invalid(p, "must have at most %d locations", maxStorageLocations))
	}
	for i, l := range st.Locations {
		if len(l) > 1024 {
			errs = append(errs, schemas.Invalid(p.Index(i), "must be at most 1024 characters"))
		} else if _, err := storage.ParseLocation(l); err != nil {
			errs = append(errs, schemas.Invalid(p.Index(i), "must be s3://bucket or s3://bucket/prefix: %v", err))
		}
	}
	return errs
}

// Workspace returns the registered workspace name; false, and no error, when it is not
// registered (storage.Registry).
func (s *Store) Workspace(ctx context.Context, name string) (api.Workspace, bool, error) {
	ws, err := readWorkspace(ctx, s.kv, name)
	if errors.Is(err, ErrNotFound) {
		return api.Workspace{}, false, nil
	}
	return ws, err == nil, err
}
