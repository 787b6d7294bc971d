package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// SetQuota sets a workspace's quota; an omitted resource is unlimited.
func (c *Client) SetQuota(ctx context.Context, workspace string, q api.Quota) error {
	body, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, quotaPath(workspace), nil, body, nil)
}

// GetQuota returns a workspace's quota, what is in use and the queue.
func (c *Client) GetQuota(ctx context.Context, workspace string) (*api.QuotaStatus, error) {
	return call[api.QuotaStatus](ctx, c, http.MethodGet, quotaPath(workspace), nil, nil)
}

func quotaPath(workspace string) string {
	return workspacePath(workspace, "quota")
}

// SetJobPriority changes the priority of a job in the quota, queued or admitted.
func (c *Client) SetJobPriority(ctx context.Context, workspace, name string, priority int32) (*api.JobPriority, error) {
	return callJSON[api.JobPriority](ctx, c, http.MethodPost, jobPath(workspace, name)+"/priority", api.JobPriority{Priority: priority})
}
