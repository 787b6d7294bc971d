package server

import (
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
	return s
}
