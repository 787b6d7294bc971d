// Package client is the Go SDK of OpenDLC's HTTP API. The dlc CLI uses it for every
// call; programs can too.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Client calls one OpenDLC API server.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
}

// Option configures a Client.
type Option func(*Client) error

// WithHTTPClient sets the HTTP client. Default: a client with no overall timeout (log
// follows are long), relying on contexts for deadlines.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error { c.http = h; return nil }
}

// WithToken sends a bearer token with every request. Default: none.
func WithToken(token string) Option {
	return func(c *Client) error { c.token = token; return nil }
}

// New returns a client for the server at baseURL, such as http://127.0.0.1:8480.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("client: invalid server address %q: want http(s)://host:port", baseURL)
	}
	c := &Client{base: u, http: &http.Client{}}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Error is an error answered by the server.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// API is the error body: a code, a message and field-path details.
	API api.Error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.API.Message)
	for _, d := range e.API.Details {
		b.WriteString("\n  ")
		b.WriteString(d.Error())
	}
	return b.String()
}

// IsNotFound reports whether err is the server's "not found".
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decode %s %s response: %w", method, path, err)
	}
	return nil
}

// call sends a request whose answer is a T, decoded.
func call[T any](ctx context.Context, c *Client, method, path string, query url.Values, body []byte) (*T, error) {
	var v T
	if err := c.do(ctx, method, path, query, body, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// callJSON sends req as JSON and decodes the answer, a T.
func callJSON[T any](ctx context.Context, c *Client, method, path string, req any) (*T, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return call[T](ctx, c, method, path, nil, body)
}

// workspacePath is /v1/workspaces/{ws}, then each of parts escaped: /{kind}/{name}...
func workspacePath(workspace string, parts ...string) string {
	p := "/v1/workspaces/" + url.PathEscape(workspace)
	var pSb120 strings.Builder
	for i, part := range parts {
		if i == 0 {
			pSb120.WriteString("/" + part) // a collection, such as jobs
		} else {
			pSb120.WriteString("/" + url.PathEscape(part))
		}
	}
	p += pSb120.String()
	return p
}

// send performs a request and turns non-2xx answers into *Error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		ct := "application/yaml"
		if json.Valid(body) {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
		eb.Error = api.Error{Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(data))}
	}
	return nil, &Error{Status: resp.StatusCode, API: eb.Error}
}

// Health checks that the server answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Validate checks a spec (YAML or JSON) without creating anything.
func (c *Client) Validate(ctx context.Context, spec []byte) error {
	return c.do(ctx, http.MethodPost, "/v1/validate", nil, spec, nil)
}

// SubmitJob creates a job from a spec (YAML or JSON).
func (c *Client) SubmitJob(ctx context.Context, spec []byte) (*api.Job, error) {
	return call[api.Job](ctx, c, http.MethodPost, "/v1/jobs", nil, spec)
}

// GetJob returns a job's spec and status.
func (c *Client) GetJob(ctx context.Context, workspace, name string) (*api.Job, error) {
	return call[api.Job](ctx, c, http.MethodGet, jobPath(workspace, name), nil, nil)
}

// ListOptions filter and page a list.
type ListOptions struct {
	Phase     string
	Framework string
	// Labels keeps jobs with every one of these labels ("key=value").
	Labels    []string
	Limit     int
	PageToken string
}

// ListJobs lists a workspace's jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, workspace string, opts ListOptions) (*api.JobList, error) {
	q := opts.query()
	if opts.Framework != "" {
		q.Set("framework", opts.Framework)
	}
	return call[api.JobList](ctx, c, http.MethodGet, workspacePath(workspace, "jobs"), q, nil)
}

// query is the phase, label and paging part of a list's query.
func (opts ListOptions) query() url.Values {
	q := url.Values{}
	if opts.Phase != "" {
		q.Set("phase", opts.Phase)
	}
	for _, l := range opts.Labels {
		q.Add("label", l)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.PageToken != "" {
		q.Set("pageToken", opts.PageToken)
	}
	return q
}

// StopJob stops a job and returns once it is terminal.
func (c *Client) StopJob(ctx context.Context, workspace, name, reason string) (*api.StopResult, error) {
	return callJSON[api.StopResult](ctx, c, http.MethodPost, jobPath(workspace, name)+"/stop", map[string]string{"reason": reason})
}

// DeleteJob stops a job if it runs and deletes it.
func (c *Client) DeleteJob(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, jobPath(workspace, name), nil, nil, nil)
}

// LogOptions select log records.
type LogOptions struct {
	// Follow keeps streaming until the job is terminal.
	Follow bool
	// Replica limits the records to one replica ("worker-0").
	Replica string
}

// Logs calls fn for every log record of a job, in order per replica.
func (c *Client) Logs(ctx context.Context, workspace, name string, opts LogOptions, fn func(events.LogRecord) error) error {
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Replica != "" {
		q.Set("replica", opts.Replica)
	}
	return streamJSONLines(ctx, c, jobPath(workspace, name)+"/logs", q, "log record", fn)
}

// EventOptions select events.
type EventOptions struct {
	// Type keeps only events of this type, such as opendlc.job.phase.v1.
	Type string
	// Job keeps only this job's events.
	Job string
	// Since is how far back to start; default one hour.
	Since time.Duration
	// Follow keeps streaming new events until ctx ends.
	Follow bool
}

// Events calls fn for every event of a workspace, in order.
func (c *Client) Events(ctx context.Context, workspace string, opts EventOptions, fn func(events.Event) error) error {
	q := url.Values{}
	if opts.Type != "" {
		q.Set("type", opts.Type)
	}
	if opts.Job != "" {
		q.Set("job", opts.Job)
	}
	if opts.Since > 0 {
		q.Set("since", opts.Since.String())
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	return streamJSONLines(ctx, c, workspacePath(workspace, "events"), q, "event", fn)
}

// streamJSONLines GETs path and calls fn with each JSON line of the answer, decoded.
func streamJSONLines[T any](ctx context.Context, c *Client, path string, q url.Values, what string, fn func(T) error) error {
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			if ctx.Err() != nil {
				// The stream was cut short because ctx ended: a partial last line.
				return ctx.Err()
			}
			return fmt.Errorf("client: decode %s: %w", what, err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("client: read %ss: %w", what, err)
	}
	return ctx.Err()
}

// WaitJob polls a job until it is terminal, calling onChange (if not nil) whenever its
// phase or replicas change.
func (c *Client) WaitJob(ctx context.Context, workspace, name string, interval time.Duration, onChange func(*api.Job)) (*api.Job, error) {
	return poll(ctx, interval, onChange,
		func(ctx context.Context) (*api.Job, error) { return c.GetJob(ctx, workspace, name) },
		func(j *api.Job) (string, bool) {
			key := string(j.Status.Phase)
			var keySb317 strings.Builder
			for _, r := range j.Status.Replicas {
				keySb317.WriteString("|" + string(r.Phase))
			}
			key += keySb317.String()
			return key, j.Status.Phase.Terminal()
		})
}

// poll reads an object every interval until done says it has ended, calling onChange
// (if not nil) whenever the object's key (a summary of its state) changes.
func poll[T any](ctx context.Context, interval time.Duration, onChange func(T),
	get func(context.Context) (T, error), state func(T) (key string, done bool)) (T, error) {
	var zero T
	lastKey := ""
	var failingSince time.Time
	for {
		obj, err := get(ctx)
		if err != nil {
			// The server could not answer for now (503: Temporal could not reach the
			// workflow in time, as while a killed worker is replaced): ask again, for up
			// to pollUnavailableFor of failures in a row.
			if !unavailable(err) || ctx.Err() != nil {
				return zero, err
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) > pollUnavailableFor {
				return zero, err
			}
			select {
			case <-ctx.Done():
				return zero, err
			case <-time.After(interval):
			}
			continue
		}
		failingSince = time.Time{}
		key, done := state(obj)
		if key != lastKey && onChange != nil {
			onChange(obj)
		}
		lastKey = key
		if done {
			return obj, nil
		}
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// pollUnavailableFor is how long the Wait functions keep asking while the server
// answers 503 Unavailable.
const pollUnavailableFor = 2 * time.Minute

// unavailable reports whether err is the server's 503: it could not answer now.
func unavailable(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Status == http.StatusServiceUnavailable
}

func jobPath(workspace, name string) string {
	return workspacePath(workspace, "jobs", name)
}

// ApplyRule creates or replaces a notification rule from a spec (YAML or JSON).
func (c *Client) ApplyRule(ctx context.Context, spec []byte) (*schemas.NotificationRule, error) {
	return call[schemas.NotificationRule](ctx, c, http.MethodPost, "/v1/notificationrules", nil, spec)
}

// GetRule returns a notification rule, its secrets redacted.
func (c *Client) GetRule(ctx context.Context, workspace, name string) (*schemas.NotificationRule, error) {
	return call[schemas.NotificationRule](ctx, c, http.MethodGet, rulePath(workspace, name), nil, nil)
}

// ListRules lists a workspace's notification rules, their secrets redacted.
func (c *Client) ListRules(ctx context.Context, workspace string) (*api.RuleList, error) {
	return call[api.RuleList](ctx, c, http.MethodGet, workspacePath(workspace, "notificationrules"), nil, nil)
}

// DeleteRule deletes a notification rule.
func (c *Client) DeleteRule(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, rulePath(workspace, name), nil, nil, nil)
}

func rulePath(workspace, name string) string {
	return workspacePath(workspace, "notificationrules", name)
}

// CloneJob starts a new job, name, from an existing one's spec with overrides (a JSON
// merge patch of the spec document; nil for none).
func (c *Client) CloneJob(ctx context.Context, workspace, from, name string, overrides map[string]any) (*api.Job, error) {
	return callJSON[api.Job](ctx, c, http.MethodPost, jobPath(workspace, from)+"/clone", api.CloneRequest{Name: name, Overrides: overrides})
}
