package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schedule"
)

// CreateSchedule creates a schedule from a spec (YAML or JSON).
func (c *Client) CreateSchedule(ctx context.Context, spec []byte) (*api.ScheduleView, error) {
	var s api.ScheduleView
	if err := c.do(ctx, http.MethodPost, "/v1/schedules", nil, spec, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UpdateSchedule replaces a schedule's spec (YAML or JSON); the document names the
// schedule.
func (c *Client) UpdateSchedule(ctx context.Context, workspace, name string, spec []byte) (*api.ScheduleView, error) {
	var s api.ScheduleView
	if err := c.do(ctx, http.MethodPut, schedulePath(workspace, name), nil, spec, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSchedule returns a schedule's spec and status with its next fire times (next of
// them; 0 for the server's default of 5).
func (c *Client) GetSchedule(ctx context.Context, workspace, name string, next int) (*api.ScheduleView, error) {
	q := url.Values{}
	if next > 0 {
		q.Set("next", fmt.Sprint(next))
	}
	var s api.ScheduleView
	if err := c.do(ctx, http.MethodGet, schedulePath(workspace, name), q, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSchedules lists one page of a workspace's schedules (limit 0: the server's
// default; pageToken from the previous page).
func (c *Client) ListSchedules(ctx context.Context, workspace string, limit int, pageToken string) (*api.ScheduleList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	var l api.ScheduleList
	if err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+url.PathEscape(workspace)+"/schedules", q, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
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
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return nil, err
		}
	}
	var s api.ScheduleView
	if err := c.do(ctx, http.MethodPost, schedulePath(workspace, name)+"/"+op, nil, body, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// TriggerSchedule runs a schedule's action now. An empty policy uses the schedule's
// overlap policy; schedule.AllowAll runs it even while another run runs.
func (c *Client) TriggerSchedule(ctx context.Context, workspace, name string, policy schedule.OverlapPolicy) (*api.TriggerScheduleResult, error) {
	body, err := json.Marshal(api.TriggerScheduleRequest{OverlapPolicy: policy})
	if err != nil {
		return nil, err
	}
	var r api.TriggerScheduleResult
	if err := c.do(ctx, http.MethodPost, schedulePath(workspace, name)+"/trigger", nil, body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// BackfillSchedule runs every time of [from, to) the schedule names, once each. An empty
// policy runs them one after another (bufferAll); schedule.AllowAll runs them at once.
func (c *Client) BackfillSchedule(ctx context.Context, workspace, name string, from, to time.Time, policy schedule.OverlapPolicy) (*api.BackfillScheduleResult, error) {
	body, err := json.Marshal(api.BackfillScheduleRequest{From: from, To: to, OverlapPolicy: policy})
	if err != nil {
		return nil, err
	}
	var r api.BackfillScheduleResult
	if err := c.do(ctx, http.MethodPost, schedulePath(workspace, name)+"/backfill", nil, body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeleteSchedule deletes a schedule; the jobs it started are left alone.
func (c *Client) DeleteSchedule(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, schedulePath(workspace, name), nil, nil, nil)
}

func schedulePath(workspace, name string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/schedules/" + url.PathEscape(name)
}
