package activities

import (
	"context"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// WorkspaceRegistry reads the workspace registry (auth.WorkspaceReader).
type WorkspaceRegistry interface {
	// Workspace returns the registered workspace name; false when it is not
	// registered.
	Workspace(ctx context.Context, name string) (api.Workspace, bool, error)
}

// WorkspaceConfig is what a job takes from its workspace's registry entry when it
// starts, and keeps for its life: the namespace its pods run in and their defaults.
type WorkspaceConfig struct {
	// Namespace is the workspace's configured namespace; empty when the workspace is
	// not registered (the backend then maps the workspace to one itself).
	Namespace string `json:"namespace,omitempty"`
	// PodDefaults are the workspace's pod defaults, if any.
	PodDefaults *schemas.PodDefaults `json:"podDefaults,omitempty"`
}

// ResolveWorkspace reads a workspace's configuration from the registry. A workspace
// that is not registered (jobs an admin submits to a workspace never created), or a
// worker with no registry, has the zero configuration.
func (a *JobActivities) ResolveWorkspace(ctx context.Context, workspace string) (WorkspaceConfig, error) {
	if a.Workspaces == nil {
		return WorkspaceConfig{}, nil
	}
	ws, ok, err := a.Workspaces.Workspace(ctx, workspace)
	if err != nil || !ok {
		return WorkspaceConfig{}, err
	}
	return WorkspaceConfig{Namespace: ws.Namespace, PodDefaults: ws.PodDefaults}, nil
}
