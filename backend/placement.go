package backend

import (
	"errors"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// DefaultPlacementTimeout is how long an attempt may wait for every replica to be
// placed (scheduled onto a node) when neither the job (spec.resources.placementTimeout)
// nor its pool's policy says otherwise. When it passes, the attempt's replicas are
// released and the job waits Queued before it tries again, so a partly placed gang
// never holds accelerators for long.
const DefaultPlacementTimeout = 10 * time.Minute

// PlacementTimeouts is implemented by backends whose pools set their own placement
// timeout (the kubernetes backend's pool policies).
type PlacementTimeouts interface {
	// PlacementTimeout is the placement timeout of pool's jobs that set none: a
	// positive duration, or zero for no timeout (wait for ever).
	PlacementTimeout(pool schemas.Pool) time.Duration
}

// PlacementTimeoutFor is the placement timeout of a job of pool on b whose spec sets
// none (spec.resources.placementTimeout zero): b's pool's, else
// DefaultPlacementTimeout.
func PlacementTimeoutFor(b Backend, pool schemas.Pool) time.Duration {
	if p, ok := b.(PlacementTimeouts); ok {
		return p.PlacementTimeout(pool)
	}
	return DefaultPlacementTimeout
}

// ErrUnschedulable marks a Launch refused because the gang can never fit the nodes it
// may use, even were they empty (a replica asks more than any node has, or the gang
// more than all of them together): nothing was started. Unlike
// ErrInsufficientResources, waiting for other gangs to end does not help; the cluster
// has to change (nodes added, uncordoned or released from quarantine). Its message
// names what is short. The activities turn it into a non-retryable Temporal error of
// type Unschedulable; the job waits Queued with that message and a condition, and
// tries again with a longer backoff.
var ErrUnschedulable = errors.New("backend: unschedulable")

// Unschedulable marks err as a gang that cannot fit (errors.Is(err,
// ErrUnschedulable) holds); its message is err's.
func Unschedulable(err error) error { return unschedulableError{err} }

type unschedulableError struct{ err error }

func (e unschedulableError) Error() string   { return e.err.Error() }
func (e unschedulableError) Unwrap() []error { return []error{e.err, ErrUnschedulable} }
