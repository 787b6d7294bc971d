package server

import (
	"context"
	"errors"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/storage"
)

// WithStorage makes the server refuse (422, naming each field) a document whose S3
// URIs leave its workspace's locations: those of its registry entry, else
// root/<workspace>/ (storage.Policy). root "" restricts only the workspaces whose
// entry names locations.
func WithStorage(root string) Option {
	return func(o *Options) { o.StorageRoot, o.Storage = root, true }
}

// storageRegistry reads workspaces from the token store; nil without one.
func storageRegistry(s *auth.Store) storage.Registry {
	if s == nil {
		return nil
	}
	return authRegistry{s}
}

// authRegistry adapts auth.Store to storage.Registry.
type authRegistry struct{ s *auth.Store }

func (r authRegistry) Workspace(ctx context.Context, name string) (api.Workspace, bool, error) {
	ws, err := r.s.GetWorkspace(ctx, name)
	if errors.Is(err, auth.ErrNotFound) {
		return api.Workspace{}, false, nil
	}
	return ws, err == nil, err
}
