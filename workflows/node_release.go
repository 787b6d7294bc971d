package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
)

// An administrator's release of a quarantined node (`dlc node release`, `POST
// /v1/nodes/{name}/release`): the service sends the NodeHealth workflow the
// UpdateReleaseNode update, whose handler releases the node through the ReleaseNode
// activity (on a worker whose backend quarantines nodes) and publishes the release as a
// node-health event (status Healthy), as a re-check's release is.

// Wire names of the release.
const (
	// UpdateReleaseNode releases a node (ReleaseNodeRequest → activities.ReleaseNodeResult).
	UpdateReleaseNode = "release-node"
	// ActivityReleaseNode releases a node (activities.ReleaseNodeInput →
	// activities.ReleaseNodeResult).
	ActivityReleaseNode = "ReleaseNode"
)

// ReleaseNodeRequest asks the NodeHealth workflow to release a node.
type ReleaseNodeRequest struct {
	Node string `json:"node"`
	// By is the identity that asked (the token's name); Reason is its optional why.
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// validateReleaseNode refuses a request without a node.
func validateReleaseNode(req ReleaseNodeRequest) error {
	if req.Node == "" {
		return errors.New("node: required")
	}
	return nil
}

// setReleaseHandler sets the release update of the NodeHealth workflow.
func (w *nodeHealthWorkflow) setReleaseHandler(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateReleaseNode,
		func(ctx workflow.Context, req ReleaseNodeRequest) (activities.ReleaseNodeResult, error) {
			msg := "released from quarantine by " + req.By
			if req.Reason != "" {
				msg += ": " + req.Reason
			}
			res, err := releaseNode(ctx, activities.ReleaseNodeInput{Node: req.Node, Message: msg})
			if err != nil || !res.Released {
				return res, err
			}
			w.state.Released++
			m, err := NodeHealthEvent(res.Health, "")
			if err != nil {
				w.logger.Error("could not encode a node-health event", "node", req.Node, "error", err)
				return res, nil
			}
			if err := publishEvents(ctx, []events.Msg{m}, time.Minute); err != nil {
				w.logger.Error("node-health event not published", "node", req.Node, "error", err)
			}
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: validateReleaseNode},
	)
}

// releaseNode runs the ReleaseNode activity: a node patch, retried a few times.
func releaseNode(ctx workflow.Context, in activities.ReleaseNodeInput) (activities.ReleaseNodeResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeNodeNotFound},
		},
	})
	// The activity's error goes back as it is: the caller reads its type (NodeNotFound).
	return call[activities.ReleaseNodeResult](actx, ActivityReleaseNode, in)
}
