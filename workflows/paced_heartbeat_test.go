package workflows

import (
	"testing"
	"time"
)

func TestSetLongHeartbeatTimeout(t *testing.T) {
	t.Cleanup(func() { _ = SetLongHeartbeatTimeout(0) })
	if got := longHeartbeat(); got != DefaultLongHeartbeatTimeout {
		t.Fatalf("default %s, want %s", got, DefaultLongHeartbeatTimeout)
	}
	if err := SetLongHeartbeatTimeout(time.Second); err == nil {
		t.Fatal("a 1s timeout was accepted")
	}
	if got := longHeartbeat(); got != DefaultLongHeartbeatTimeout {
		t.Fatalf("after a refused setting %s, want %s", got, DefaultLongHeartbeatTimeout)
	}
	if err := SetLongHeartbeatTimeout(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := longHeartbeat(); got != 15*time.Second {
		t.Fatalf("got %s, want 15s", got)
	}
	if err := SetLongHeartbeatTimeout(0); err != nil {
		t.Fatal(err)
	}
	if got := longHeartbeat(); got != DefaultLongHeartbeatTimeout {
		t.Fatalf("after reset %s, want %s", got, DefaultLongHeartbeatTimeout)
	}
}
