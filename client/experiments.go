package client

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// CreateExperiment validates and starts an HPO experiment from a spec (YAML or JSON).
func (c *Client) CreateExperiment(ctx context.Context, spec []byte) (*api.ExperimentDetail, error) {
	return call[api.ExperimentDetail](ctx, c, http.MethodPost, "/v1/experiments", nil, spec)
}

// GetExperiment returns an experiment's spec and status: every trial and the best.
func (c *Client) GetExperiment(ctx context.Context, workspace, name string) (*api.ExperimentDetail, error) {
	return call[api.ExperimentDetail](ctx, c, http.MethodGet, experimentPath(workspace, name), nil, nil)
}

// ListExperiments lists a workspace's experiments, newest first. Framework is ignored.
func (c *Client) ListExperiments(ctx context.Context, workspace string, opts ListOptions) (*api.ExperimentList, error) {
	return call[api.ExperimentList](ctx, c, http.MethodGet, workspacePath(workspace, "experiments"), opts.query(), nil)
}

// StopExperiment stops an experiment's running trials and returns once it is Stopped
// (or, for an experiment that has ended, its final phase).
func (c *Client) StopExperiment(ctx context.Context, workspace, name, reason string) (*api.ExperimentActionResult, error) {
	return c.experimentAction(ctx, workspace, name, "stop", map[string]any{"reason": reason})
}

// ResumeExperiment makes a Stopped experiment carry on.
func (c *Client) ResumeExperiment(ctx context.Context, workspace, name string) (*api.ExperimentActionResult, error) {
	return c.experimentAction(ctx, workspace, name, "resume", map[string]any{})
}

// ExtendExperiment raises an experiment's maxTrials to maxTrials.
func (c *Client) ExtendExperiment(ctx context.Context, workspace, name string, maxTrials int) (*api.ExperimentActionResult, error) {
	return c.experimentAction(ctx, workspace, name, "extend", api.ExtendRequest{MaxTrials: maxTrials})
}

// EnqueueTrials asks an experiment to run these parameter sets (parameter name →
// value) as its next trials, before the algorithm's suggestions.
func (c *Client) EnqueueTrials(ctx context.Context, workspace, name string, trials ...map[string]any) (*api.ExperimentActionResult, error) {
	return c.experimentAction(ctx, workspace, name, "enqueue", api.EnqueueRequest{Trials: trials})
}

func (c *Client) experimentAction(ctx context.Context, workspace, name, action string, req any) (*api.ExperimentActionResult, error) {
	return callJSON[api.ExperimentActionResult](ctx, c, http.MethodPost, experimentPath(workspace, name)+"/"+action, req)
}

// DeleteExperiment stops an experiment if it runs and deletes it.
func (c *Client) DeleteExperiment(ctx context.Context, workspace, name string) error {
	return c.do(ctx, http.MethodDelete, experimentPath(workspace, name), nil, nil, nil)
}

// WaitExperiment polls an experiment until it has ended (Succeeded, Failed, or Stopped
// when stopped is true), calling onChange (if not nil) whenever its phase or a trial's
// phase changes.
func (c *Client) WaitExperiment(ctx context.Context, workspace, name string, interval time.Duration, stopped bool,
	onChange func(*api.ExperimentDetail)) (*api.ExperimentDetail, error) {
	return poll(ctx, interval, onChange,
		func(ctx context.Context) (*api.ExperimentDetail, error) { return c.GetExperiment(ctx, workspace, name) },
		func(e *api.ExperimentDetail) (string, bool) {
			var key strings.Builder
			key.WriteString(string(e.Status.Phase))
			for _, t := range e.Status.Trials {
				key.WriteString("|" + t.Job + ":" + string(t.Phase))
			}
			return key.String(), e.Status.Phase.Terminal() || (stopped && e.Status.Phase == schemas.ExperimentStopped)
		})
}

func experimentPath(workspace, name string) string {
	return workspacePath(workspace, "experiments", name)
}
