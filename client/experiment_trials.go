package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// ListTrials returns an experiment's trials, by ID; with phase set, only those in that
// phase.
func (c *Client) ListTrials(ctx context.Context, workspace, experiment, phase string) (*api.TrialList, error) {
	q := url.Values{}
	if phase != "" {
		q.Set("phase", phase)
	}
	return call[api.TrialList](ctx, c, http.MethodGet, experimentPath(workspace, experiment)+"/trials", q, nil)
}

// GetTrial returns one trial of an experiment.
func (c *Client) GetTrial(ctx context.Context, workspace, experiment string, id int) (*schemas.TrialStatus, error) {
	return call[schemas.TrialStatus](ctx, c, http.MethodGet, experimentPath(workspace, experiment)+"/trials/"+strconv.Itoa(id), nil, nil)
}
