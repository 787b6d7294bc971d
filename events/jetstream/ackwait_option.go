package jetstream

import (
	"fmt"
	"time"
)

// AckWaitOption is the functional option both dispatchers (notify, triggers) give as
// WithAckWait: it refuses an ack wait shorter than MinAckWait, with an error that starts
// with pkg, and otherwise stores d with set.
func AckWaitOption[O any](pkg string, d time.Duration, set func(*O, time.Duration)) func(*O) error {
	return func(o *O) error {
		if err := CheckAckWait(d); err != nil {
			return fmt.Errorf("%s: %w", pkg, err)
		}
		set(o, d)
		return nil
	}
}
