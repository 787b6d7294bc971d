package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/opendlc/opendlc/api"
)

// ListNodes returns every node's latest health verdict and quarantine state (a token
// of every workspace).
func (c *Client) ListNodes(ctx context.Context) (*api.NodeList, error) {
	return call[api.NodeList](ctx, c, http.MethodGet, "/v1/nodes", nil, nil)
}

// GetNode returns one node's latest health verdict and quarantine state.
func (c *Client) GetNode(ctx context.Context, name string) (*api.Node, error) {
	return call[api.Node](ctx, c, http.MethodGet, nodePath(name), nil, nil)
}

// ReleaseNode releases a node from quarantine at once (a cluster administrator); the
// reason goes into the release's node-health event.
func (c *Client) ReleaseNode(ctx context.Context, name, reason string) (*api.Node, error) {
	return callJSON[api.Node](ctx, c, http.MethodPost, nodePath(name)+"/release", api.NodeRelease{Reason: reason})
}

// NodeHealer returns the node self-healing workflow's state (a cluster
// administrator); Running is false when the workflow is not running.
func (c *Client) NodeHealer(ctx context.Context) (*api.NodeHealer, error) {
	return call[api.NodeHealer](ctx, c, http.MethodGet, "/v1/node-healer", nil, nil)
}

func nodePath(name string) string { return "/v1/nodes/" + url.PathEscape(name) }
