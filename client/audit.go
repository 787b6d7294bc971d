package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/api"
)

// AuditOptions bound a read of a workspace's audit records.
type AuditOptions struct {
	// Since is how far back to read; default, and at most, 168 hours.
	Since time.Duration
	// Limit is how many records at most; default, and at most, 50.
	Limit int
}

// Audit returns a workspace's latest audit records, newest first. Only a token that
// may manage the workspace's tokens (a workspace admin of it, or an admin) may read
// them.
func (c *Client) Audit(ctx context.Context, workspace string, opts AuditOptions) (*api.AuditList, error) {
	q := url.Values{}
	if opts.Since > 0 {
		q.Set("since", opts.Since.String())
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return call[api.AuditList](ctx, c, http.MethodGet, workspacePath(workspace, "audit"), q, nil)
}
