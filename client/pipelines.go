package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
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

// ApplyPipelineTemplate creates or replaces a stored pipeline template (YAML or JSON).
func (c *Client) ApplyPipelineTemplate(ctx context.Context, spec []byte) (*schemas.StoredPipelineTemplate, error) {
	return call[schemas.StoredPipelineTemplate](ctx, c, http.MethodPost, "/v1/templates", nil, spec)
}

// GetPipelineTemplate returns a stored pipeline template.
func (c *Client) GetPipelineTemplate(ctx context.Context, workspace, name string) (*schemas.StoredPipelineTemplate, error) {
	return call[schemas.StoredPipelineTemplate](ctx, c, http.MethodGet, workspacePath(workspace, "templates", name), nil, nil)
}

// ListPipelineTemplates lists a workspace's stored pipeline templates.
func (c *Client) ListPipelineTemplates(ctx context.Context, workspace string) (*api.PipelineTemplateList, error) {
	return call[api.PipelineTemplateList](ctx, c, http.MethodGet, workspacePath(workspace, "templates"), nil, nil)
}

// DeletePipelineTemplate deletes a stored pipeline template; its runs are not changed.
func (c *Client) DeletePipelineTemplate(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, workspacePath(workspace, "templates", name), nil, nil, nil)
}

// RunPipelineTemplate starts a pipeline run named run of a stored template's spec as it
// is now, with params overriding its parameters' defaults.
func (c *Client) RunPipelineTemplate(ctx context.Context, workspace, template, run string, params map[string]string) (*api.PipelineRun, error) {
	return callJSON[api.PipelineRun](ctx, c, http.MethodPost, workspacePath(workspace, "templates", template)+"/run",
		api.TemplateRunRequest{Name: run, Params: params})
}
