package jetstream_test

import (
	"testing"
	"time"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// A consumer's ack wait must be at least MinAckWait; the error names the value.
func TestCheckAckWait(t *testing.T) {
	if err := dlcjs.CheckAckWait(time.Second); err != nil {
		t.Errorf("1s: %v", err)
	}
	err := dlcjs.CheckAckWait(500 * time.Millisecond)
	if err == nil || err.Error() != "ack wait 500ms: must be at least 1s" {
		t.Errorf("500ms: err = %v", err)
	}
}
