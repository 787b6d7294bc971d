package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schedule"
)

// CreateSchedule creates a schedule from a spec (YAML or JSON).
func (c *Client) CreateSchedule(ctx context.Context, spec []byte) (*api.ScheduleView, error) {
	return call[api.ScheduleView](ctx, c, http.MethodPost, "/v1/schedules", nil, spec)
}

// UpdateSchedule replaces a schedule's spec (YAML or JSON); the document names the
// schedule.
func (c *Client) UpdateSchedule(ctx context.Context, workspace, name string, spec []byte) (*api.ScheduleView, error) {
	return call[api.ScheduleView](ctx, c, http.MethodPut, schedulePath(workspace, name), nil, spec)
}

// GetSchedule returns a schedule's spec and status with its next fire times (next of
// them; 0 for the server's default of 5).
func (c *Client) GetSchedule(ctx context.Context, workspace, name string, next int) (*api.ScheduleView, error) {
	q := url.Values{}
	if next > 0 {
		q.Set("next", strconv.Itoa(next))
	}
	return call[api.ScheduleView](ctx, c, http.MethodGet, schedulePath(workspace, name), q, nil)
}

// ListSchedules lists one page of a workspace's schedules (limit 0: the server's
// default; pageToken from the previous page).
func (c *Client) ListSchedules(ctx context.Context, workspace string, limit int, pageToken string) (*api.ScheduleList, error) {
	q := ListOptions{Limit: limit, PageToken: pageToken}.query()
	return call[api.ScheduleList](ctx, c, http.MethodGet, workspacePath(workspace, "schedules"), q, nil)
}

// PauseSchedule pauses a schedule's scheduled runs, with a note saying why.
func (c *Client) PauseSchedule(ctx context.Context, workspace, name, note string) (*api.ScheduleView, error) {
	return c.scheduleCall(ctx, workspace, name, "pause", api.PauseScheduleRequest{Note: note})
}

// ResumeSchedule resumes a paused schedule.
func (c *Client) ResumeSchedule(ctx context.Context, workspace, name string) (*api.ScheduleView, error) {
	return c.scheduleCall(ctx, workspace, name, "resume", nil)
}

func (c *Client) scheduleCall(ctx context.Context, workspace, name, op string, req any) (*api.ScheduleView, error) {
	if req == nil {
		return call[api.ScheduleView](ctx, c, http.MethodPost, schedulePath(workspace, name)+"/"+op, nil, nil)
	}
	return callJSON[api.ScheduleView](ctx, c, http.MethodPost, schedulePath(workspace, name)+"/"+op, req)
}

// TriggerSchedule runs a schedule's action now. An empty policy uses the schedule's
// overlap policy; schedule.AllowAll runs it even while another run runs.
func (c *Client) TriggerSchedule(ctx context.Context, workspace, name string, policy schedule.OverlapPolicy) (*api.TriggerScheduleResult, error) {
	return callJSON[api.TriggerScheduleResult](ctx, c, http.MethodPost, schedulePath(workspace, name)+"/trigger",
		api.TriggerScheduleRequest{OverlapPolicy: policy})
}

// BackfillSchedule runs every time of [from, to) the schedule names, once each. An empty
// policy runs them one after another (bufferAll); schedule.AllowAll runs them at once.
func (c *Client) BackfillSchedule(ctx context.Context, workspace, name string, from, to time.Time, policy schedule.OverlapPolicy) (*api.BackfillScheduleResult, error) {
	return callJSON[api.BackfillScheduleResult](ctx, c, http.MethodPost, schedulePath(workspace, name)+"/backfill",
		api.BackfillScheduleRequest{From: from, To: to, OverlapPolicy: policy})
}

// DeleteSchedule deletes a schedule; the jobs it started are left alone.
func (c *Client) DeleteSchedule(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, schedulePath(workspace, name), nil, nil, nil)
}

func schedulePath(workspace, name string) string {
	return workspacePath(workspace, "schedules", name)
}
