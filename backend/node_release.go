package backend

import (
	"context"
	"errors"
)

// ErrNodeNotFound is returned for a node the cluster does not have.
var ErrNodeNotFound = errors.New("node not found")

// ReasonReleased is the reason of the verdict of a node an administrator released from
// quarantine.
const ReasonReleased = "Released"

// NodeReleaser is implemented by backends that quarantine nodes (NodeChecker) and
// can release one on an administrator's word, whatever its backoff says.
type NodeReleaser interface {
	// ReleaseNode removes the node's quarantine. It returns the verdict (Healthy, reason
	// ReasonReleased, QuarantinedAt the quarantine that ended) and true, or false when
	// the node was not quarantined (nothing changed); ErrNodeNotFound for an unknown
	// node.
	ReleaseNode(ctx context.Context, node, message string) (NodeHealth, bool, error)
}
