package client

import (
	"context"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// GetTriggerStatus answers what a trigger's gate holds (debounce, rate limit,
// concurrency; docs/triggers.md, "Controls").
func (c *Client) GetTriggerStatus(ctx context.Context, workspace, name string) (*api.TriggerStatus, error) {
	return call[api.TriggerStatus](ctx, c, http.MethodGet, triggerPath(workspace, name)+"/status", nil, nil)
}
