package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
)

// HistoryQuery selects a workspace's run records (GET /v1/workspaces/{ws}/history).
// Zero fields select everything.
type HistoryQuery struct {
	// Kind is TrainingJob, Experiment or Pipeline.
	Kind runs.Kind
	Name string
	// Labels must all be on the record ("key=value").
	Labels []string
	Phase  string
	// FinishedAfter and FinishedBefore bound the runs' finish: [after, before).
	FinishedAfter, FinishedBefore time.Time
	// Origin is what started the runs: "Kind" or "Kind/name", such as
	// "Schedule/nightly".
	Origin string
	// Parent selects the runs of an experiment or pipeline run by its uid.
	Parent string
	// Checkpoint selects the runs whose checkpoint, or one of whose inputs, starts
	// with this URI.
	Checkpoint string
	// Limit is the page size (default 100, at most 1000); After the previous page's
	// Next.
	Limit int
	After string
}

func (q HistoryQuery) values() url.Values {
	v := url.Values{}
	set := func(name, val string) {
		if val != "" {
			v.Set(name, val)
		}
	}
	set("kind", string(q.Kind))
	set("name", q.Name)
	for _, l := range q.Labels {
		v.Add("label", l)
	}
	set("phase", q.Phase)
	set("finishedAfter", formatTime(q.FinishedAfter))
	set("finishedBefore", formatTime(q.FinishedBefore))
	set("origin", q.Origin)
	set("parent", q.Parent)
	set("checkpoint", q.Checkpoint)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set("after", q.After)
	return v
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// History returns one page of a workspace's run records, newest first: finished jobs,
// experiments and pipeline runs, kept after Temporal has forgotten them.
func (c *Client) History(ctx context.Context, workspace string, q HistoryQuery) (*runs.Page, error) {
	return call[runs.Page](ctx, c, http.MethodGet, workspacePath(workspace, "history"), q.values(), nil)
}

// HistoryRecord returns one run record by its kind and uid; IsNotFound when the
// workspace has none.
func (c *Client) HistoryRecord(ctx context.Context, workspace string, kind runs.Kind, uid string) (*runs.Record, error) {
	return call[runs.Record](ctx, c, http.MethodGet, workspacePath(workspace, "history", string(kind), uid), nil, nil)
}

// LineageQuery asks for the lineage of a checkpoint or of a schedule: set exactly one.
type LineageQuery struct {
	// Checkpoint is a checkpoint or model URI (or a prefix): the runs that wrote or
	// read under it, with their inputs.
	Checkpoint string
	// Schedule is a schedule's name: every run it started, and those runs' own runs
	// (an experiment's trials, a pipeline run's steps).
	Schedule string
}

// Lineage returns the run records of a checkpoint's or a schedule's lineage, newest
// first.
func (c *Client) Lineage(ctx context.Context, workspace string, q LineageQuery) (*api.Lineage, error) {
	v := url.Values{}
	if q.Checkpoint != "" {
		v.Set("checkpoint", q.Checkpoint)
	}
	if q.Schedule != "" {
		v.Set("schedule", q.Schedule)
	}
	return call[api.Lineage](ctx, c, http.MethodGet, workspacePath(workspace, "lineage"), v, nil)
}

// UsageQuery selects the usage to sum (GET /v1/usage).
type UsageQuery struct {
	// Workspaces are the workspaces to sum; empty: the token's own (every workspace
	// for a token of every workspace).
	Workspaces []string
	// From and To bound the range, [From, To); zero: the last 30 days.
	From, To time.Time
	// GroupByLabel groups by this label's value as well.
	GroupByLabel string
}

// Usage returns GPU-, CPU- and memory-hours per workspace and UTC day (and label
// value), from the attempts' running times.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (*api.Usage, error) {
	v := url.Values{}
	for _, ws := range q.Workspaces {
		v.Add("workspace", ws)
	}
	if s := formatTime(q.From); s != "" {
		v.Set("from", s)
	}
	if s := formatTime(q.To); s != "" {
		v.Set("to", s)
	}
	if q.GroupByLabel != "" {
		v.Set("groupByLabel", q.GroupByLabel)
	}
	return call[api.Usage](ctx, c, http.MethodGet, "/v1/usage", v, nil)
}
