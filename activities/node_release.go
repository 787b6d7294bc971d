package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/backend"
)

// ErrTypeNodeNotFound is the error type of ReleaseNode for a node the cluster does not
// have.
const ErrTypeNodeNotFound = "NodeNotFound"

// ReleaseNodeInput asks for a node's release from quarantine.
type ReleaseNodeInput struct {
	Node string `json:"node"`
	// Message says who released it and why; it goes into the verdict.
	Message string `json:"message"`
}

// ReleaseNodeResult is the node's verdict after the release.
type ReleaseNodeResult struct {
	Health backend.NodeHealth `json:"health"`
	// Released is false when the node was not quarantined (nothing changed).
	Released bool `json:"released"`
}

// ReleaseNode releases a quarantined node on an administrator's word. A backend that
// does not quarantine nodes has none to release: the answer is not released.
func (a *JobActivities) ReleaseNode(ctx context.Context, in ReleaseNodeInput) (ReleaseNodeResult, error) {
	nr, ok := a.Backend.(backend.NodeReleaser)
	if !ok {
		return ReleaseNodeResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s: this backend does not quarantine nodes", in.Node), ErrTypeNodeNotFound, nil)
	}
	h, released, err := nr.ReleaseNode(ctx, in.Node, in.Message)
	if errors.Is(err, backend.ErrNodeNotFound) {
		return ReleaseNodeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNodeNotFound, err)
	}
	if err != nil {
		return ReleaseNodeResult{}, fmt.Errorf("release node %s: %w", in.Node, err)
	}
	return ReleaseNodeResult{Health: h, Released: released}, nil
}
