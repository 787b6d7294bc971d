package client

import (
	"context"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// RedriveRule queues a notification rule's dead letters for delivery again, each once
// however often it is called: at most req.Limit of them (0: 1000), written at or after
// req.Since (RFC 3339; empty: all).
func (c *Client) RedriveRule(ctx context.Context, workspace, name string, req api.RedriveRequest) (*api.RedriveResult, error) {
	return callJSON[api.RedriveResult](ctx, c, http.MethodPost, rulePath(workspace, name)+"/redrive", req)
}
