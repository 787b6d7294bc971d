package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
)

// WorkspaceReader reads the workspace registry (the DLC_AUTH bucket) and nothing else:
// what a worker needs to learn a workspace's namespace and pod defaults when a job
// starts. Unlike Store it follows no tokens.
type WorkspaceReader struct {
	kv jetstream.KeyValue
}

// OpenWorkspaceReader opens the bucket, which events/jetstream.EnsureStreams creates.
func OpenWorkspaceReader(ctx context.Context, js jetstream.JetStream) (*WorkspaceReader, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("auth: open bucket %s (created by jetstream.EnsureStreams): %w", Bucket, err)
	}
	return &WorkspaceReader{kv: kv}, nil
}

// Workspace returns the registered workspace name; false, and no error, when it is not
// registered.
func (r *WorkspaceReader) Workspace(ctx context.Context, name string) (api.Workspace, bool, error) {
	ws, err := readWorkspace(ctx, r.kv, name)
	if errors.Is(err, ErrNotFound) {
		return api.Workspace{}, false, nil
	}
	return ws, err == nil, err
}

// readWorkspace reads a workspace from kv, or returns an error wrapping ErrNotFound.
func readWorkspace(ctx context.Context, kv jetstream.KeyValue, name string) (api.Workspace, error) {
	if len(name) > maxWorkspaceLen || !dnsLabelRE.MatchString(name) {
		return api.Workspace{}, fmt.Errorf("%w: workspace %s", ErrNotFound, name)
	}
	e, err := kv.Get(ctx, workspaceKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Workspace{}, fmt.Errorf("%w: workspace %s", ErrNotFound, name)
	}
	if err != nil {
		return api.Workspace{}, fmt.Errorf("auth: get workspace %s: %w", name, err)
	}
	var ws api.Workspace
	if err := json.Unmarshal(e.Value(), &ws); err != nil {
		return api.Workspace{}, fmt.Errorf("auth: stored workspace %s: %w", name, err)
	}
	return ws, nil
}

// Names returns the names of every registered workspace.
func (r *WorkspaceReader) Names(ctx context.Context) ([]string, error) {
	keys, err := r.kv.ListKeysFiltered(ctx, workspaceKey("*"))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: list workspaces: %w", err)
	}
	var names []string
	for k := range keys.Keys() {
		names = append(names, strings.TrimPrefix(k, workspaceKey("")))
	}
	return names, nil
}
