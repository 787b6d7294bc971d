package storage

import (
	"context"
	"fmt"

	"github.com/opendlc/opendlc/api"
)

// Registry reads the workspace registry (auth.WorkspaceReader, auth.Store's reader).
type Registry interface {
	// Workspace returns the registered workspace name; false when it is not
	// registered.
	Workspace(ctx context.Context, name string) (api.Workspace, bool, error)
}

// Policy says where each workspace may store: the locations in its registry entry
// (api.Workspace.Storage), else DefaultLocation(Root, workspace). A nil Policy, or one
// with no Root, restricts only the workspaces whose entry names locations.
type Policy struct {
	// Root is s3://bucket or s3://bucket/prefix; each workspace's default location is
	// Root/<workspace>/.
	Root string
	// Workspaces is the registry; nil, every workspace has the default location.
	Workspaces Registry
}

// Locations returns a workspace's locations; nil means unrestricted (no Root and no
// locations in the workspace's entry).
func (p *Policy) Locations(ctx context.Context, workspace string) ([]Location, error) {
	if p == nil {
		return nil, nil
	}
	if p.Workspaces != nil {
		ws, ok, err := p.Workspaces.Workspace(ctx, workspace)
		if err != nil {
			return nil, fmt.Errorf("storage: workspace %s: %w", workspace, err)
		}
		if ok && ws.Storage != nil && len(ws.Storage.Locations) > 0 {
			locs, err := ParseLocations(ws.Storage.Locations)
			if err != nil {
				return nil, fmt.Errorf("storage: workspace %s: %w", workspace, err)
			}
			return locs, nil
		}
	}
	if p.Root == "" {
		return nil, nil
	}
	l, err := DefaultLocation(p.Root, workspace)
	if err != nil {
		return nil, fmt.Errorf("storage: root %s: %w", p.Root, err)
	}
	return []Location{l}, nil
}

// CheckDocument checks every URI of doc (Check) against workspace's locations.
func (p *Policy) CheckDocument(ctx context.Context, workspace string, doc any) error {
	locs, err := p.Locations(ctx, workspace)
	if err != nil {
		return err
	}
	return Check(doc, locs).Err()
}
