package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
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
	return call[api.PipelineRun](ctx, c, http.MethodPost, "/v1/pipelines", q, spec)
}

// GetPipeline returns a pipeline run: the pipeline and the status of every step.
func (c *Client) GetPipeline(ctx context.Context, workspace, name string) (*api.PipelineRun, error) {
	return call[api.PipelineRun](ctx, c, http.MethodGet, pipelinePath(workspace, name), nil, nil)
}

// ListPipelines lists a workspace's pipeline runs, newest first. Framework is ignored.
func (c *Client) ListPipelines(ctx context.Context, workspace string, opts ListOptions) (*api.PipelineList, error) {
	return call[api.PipelineList](ctx, c, http.MethodGet, workspacePath(workspace, "pipelines"), opts.query(), nil)
}

// StopPipeline stops a pipeline run (its running jobs are stopped, the steps not started
// are skipped) and returns once it is terminal.
func (c *Client) StopPipeline(ctx context.Context, workspace, name, reason string) (*api.PipelineStopResult, error) {
	return callJSON[api.PipelineStopResult](ctx, c, http.MethodPost, pipelinePath(workspace, name)+"/stop", map[string]string{"reason": reason})
}

// WaitPipeline polls a pipeline run until it is terminal, calling onChange (if not nil)
// whenever its phase or a step's phase changes.
func (c *Client) WaitPipeline(ctx context.Context, workspace, name string, interval time.Duration, onChange func(*api.PipelineRun)) (*api.PipelineRun, error) {
	return poll(ctx, interval, onChange,
		func(ctx context.Context) (*api.PipelineRun, error) { return c.GetPipeline(ctx, workspace, name) },
		func(p *api.PipelineRun) (string, bool) {
			key := string(p.Status.Phase)
			var keySb52 strings.Builder
			for _, s := range p.Status.Steps {
				keySb52.WriteString("|" + string(s.Phase))
			}
			key += keySb52.String()
			return key, p.Status.Phase.Terminal()
		})
}

// RetryPipeline starts a retry of a Failed or Stopped run: a new run, named name (empty:
// <run>-retry-<N>), that reuses the outputs of the steps that succeeded and runs the
// others.
func (c *Client) RetryPipeline(ctx context.Context, workspace, run, name string) (*api.PipelineRun, error) {
	return callJSON[api.PipelineRun](ctx, c, http.MethodPost, pipelinePath(workspace, run)+"/retry", api.PipelineRetryRequest{Name: name})
}

// DeletePipeline stops a pipeline run if it runs, then deletes it and its step jobs;
// its name can then be used again.
func (c *Client) DeletePipeline(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, pipelinePath(workspace, name), nil, nil, nil)
}

func pipelinePath(workspace, name string) string {
	return workspacePath(workspace, "pipelines", name)
}
