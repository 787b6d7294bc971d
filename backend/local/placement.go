package local

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// PlacementTimeout is zero, no placement timeout, for every pool: the local backend
// starts a gang whole or not at all (Launch refuses one that does not fit with
// ErrInsufficientResources, or ErrUnschedulable when it never can), so no gang is ever
// partly placed, and a timer per job would only lengthen its history.
func (b *Backend) PlacementTimeout(schemas.Pool) time.Duration { return 0 }
