package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
)

// PurgeJob deletes a job and everything it left: its workflow history, events, log
// records and log archive. DeleteJob keeps them readable by uid (GetJobRun).
func (c *Client) PurgeJob(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, jobPath(workspace, name), url.Values{"purge": {"true"}}, nil, nil)
}

// GetJobRun answers one run of a job by its uid, deleted or not.
func (c *Client) GetJobRun(ctx context.Context, workspace, name, uid string) (*api.Job, error) {
	return call[api.Job](ctx, c, http.MethodGet, jobPath(workspace, name), url.Values{"uid": {uid}}, nil)
}

// GetDeletedJob answers the newest run of a job's name even if it was deleted.
func (c *Client) GetDeletedJob(ctx context.Context, workspace, name string) (*api.Job, error) {
	return call[api.Job](ctx, c, http.MethodGet, jobPath(workspace, name), url.Values{"includeDeleted": {"true"}}, nil)
}

// RunLogs calls fn for every log record of one run of a job (its uid), deleted or
// not, in order per replica (one replica's with replica set).
func (c *Client) RunLogs(ctx context.Context, workspace, name, uid, replica string, fn func(events.LogRecord) error) error {
	q := url.Values{"uid": {uid}}
	if replica != "" {
		q.Set("replica", replica)
	}
	return streamJSONLines(ctx, c, jobPath(workspace, name)+"/logs", q, "log record", fn)
}
