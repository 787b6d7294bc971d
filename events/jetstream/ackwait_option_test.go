package jetstream_test

import (
	"testing"
	"time"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// The dispatchers' WithAckWait stores a valid ack wait and refuses a short one with the
// package's prefix, leaving the options as they were.
func TestAckWaitOption(t *testing.T) {
	type opts struct{ wait time.Duration }
	set := func(o *opts, d time.Duration) { o.wait = d }
	var o opts
	if err := dlcjs.AckWaitOption("pkg", 2*time.Second, set)(&o); err != nil || o.wait != 2*time.Second {
		t.Fatalf("2s: err = %v, wait = %s", err, o.wait)
	}
	err := dlcjs.AckWaitOption("pkg", time.Millisecond, set)(&o)
	if err == nil || err.Error() != "pkg: ack wait 1ms: must be at least 1s" || o.wait != 2*time.Second {
		t.Fatalf("1ms: err = %v, wait = %s", err, o.wait)
	}
}
