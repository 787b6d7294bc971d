package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// RunPipeline starts a run of a pipeline (YAML or JSON), named by its metadata.name,
// with params overriding its parameters' defaults.
func (c *Client) RunPipeline(ctx context.Context, spec []byte, params map[string]string) (*api.PipelineRun, error) {
	q := url.Values{}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("param", k+"="+params[k])
	}
	var p api.PipelineRun
	if err := c.do(ctx, http.MethodPost, "/v1/pipelines", q, spec, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetPipeline returns a pipeline run: the pipeline and the status of every step.
func (c *Client) GetPipeline(ctx context.Context, workspace, name string) (*api.PipelineRun, error) {
	var p api.PipelineRun
	if err := c.do(ctx, http.MethodGet, pipelinePath(workspace, name), nil, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListPipelines lists a workspace's pipeline runs, newest first. Framework is ignored.
func (c *Client) ListPipelines(ctx context.Context, workspace string, opts ListOptions) (*api.PipelineList, error) {
	q := url.Values{}
	if opts.Phase != "" {
		q.Set("phase", opts.Phase)
	}
	for _, l := range opts.Labels {
		q.Add("label", l)
	}
	if opts.Limit > 0 {
		q.Set("limit", fmt.Sprint(opts.Limit))
	}
	if opts.PageToken != "" {
		q.Set("pageToken", opts.PageToken)
	}
	var l api.PipelineList
	if err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+url.PathEscape(workspace)+"/pipelines", q, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// StopPipeline stops a pipeline run (its running jobs are stopped, the steps not started
// are skipped) and returns once it is terminal.
func (c *Client) StopPipeline(ctx context.Context, workspace, name, reason string) (*api.PipelineStopResult, error) {
	body, _ := json.Marshal(map[string]string{"reason": reason})
	var r api.PipelineStopResult
	if err := c.do(ctx, http.MethodPost, pipelinePath(workspace, name)+"/stop", nil, body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WaitPipeline polls a pipeline run until it is terminal, calling onChange (if not nil)
// whenever its phase or a step's phase changes.
func (c *Client) WaitPipeline(ctx context.Context, workspace, name string, interval time.Duration, onChange func(*api.PipelineRun)) (*api.PipelineRun, error) {
	return poll(ctx, interval, onChange,
		func(ctx context.Context) (*api.PipelineRun, error) { return c.GetPipeline(ctx, workspace, name) },
		func(p *api.PipelineRun) (string, bool) {
			key := string(p.Status.Phase)
			for _, s := range p.Status.Steps {
				key += "|" + string(s.Phase)
			}
			return key, p.Status.Phase.Terminal()
		})
}

func pipelinePath(workspace, name string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/pipelines/" + url.PathEscape(name)
}

// ApplyTrigger creates or replaces a trigger from a spec (YAML or JSON).
func (c *Client) ApplyTrigger(ctx context.Context, spec []byte) (*schemas.Trigger, error) {
	var t schemas.Trigger
	if err := c.do(ctx, http.MethodPost, "/v1/triggers", nil, spec, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// GetTrigger returns a trigger.
func (c *Client) GetTrigger(ctx context.Context, workspace, name string) (*schemas.Trigger, error) {
	var t schemas.Trigger
	if err := c.do(ctx, http.MethodGet, triggerPath(workspace, name), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTriggers lists a workspace's triggers.
func (c *Client) ListTriggers(ctx context.Context, workspace string) (*api.TriggerList, error) {
	var l api.TriggerList
	if err := c.do(ctx, http.MethodGet, "/v1/workspaces/"+url.PathEscape(workspace)+"/triggers", nil, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DeleteTrigger deletes a trigger; what it started keeps running.
func (c *Client) DeleteTrigger(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, triggerPath(workspace, name), nil, nil, nil)
}

func triggerPath(workspace, name string) string {
	return "/v1/workspaces/" + url.PathEscape(workspace) + "/triggers/" + url.PathEscape(name)
}
