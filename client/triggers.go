package client

import (
	"context"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// ApplyTrigger creates or replaces a trigger from a spec (YAML or JSON).
func (c *Client) ApplyTrigger(ctx context.Context, spec []byte) (*schemas.Trigger, error) {
	return call[schemas.Trigger](ctx, c, http.MethodPost, "/v1/triggers", nil, spec)
}

// GetTrigger returns a trigger.
func (c *Client) GetTrigger(ctx context.Context, workspace, name string) (*schemas.Trigger, error) {
	return call[schemas.Trigger](ctx, c, http.MethodGet, triggerPath(workspace, name), nil, nil)
}

// ListTriggers lists a workspace's triggers.
func (c *Client) ListTriggers(ctx context.Context, workspace string) (*api.TriggerList, error) {
	return call[api.TriggerList](ctx, c, http.MethodGet, workspacePath(workspace, "triggers"), nil, nil)
}

// DeleteTrigger deletes a trigger; what it started keeps running.
func (c *Client) DeleteTrigger(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, triggerPath(workspace, name), nil, nil, nil)
}

func triggerPath(workspace, name string) string {
	return workspacePath(workspace, "triggers", name)
}
