package client

import (
	"context"
	"net/http"

	"github.com/opendlc/opendlc/api"
)

// ScaleJob sets a running elastic job's replica count (all roles together) within its
// spec.elastic bounds and returns once the gang has it; the replicas that keep running
// are not restarted. A count out of bounds, or a job that is not elastic or not
// Running, is an *api.Error naming the field replicas.
func (c *Client) ScaleJob(ctx context.Context, workspace, name string, replicas int32) (*api.ScaleResult, error) {
	return callJSON[api.ScaleResult](ctx, c, http.MethodPost, jobPath(workspace, name)+"/scale", api.ScaleRequest{Replicas: replicas})
}
