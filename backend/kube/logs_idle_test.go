package kube

import (
	"testing"
	"time"
)

func TestIdlePatienceDoublesUpToTheCap(t *testing.T) {
	idle := 0
	var got []time.Duration
	for range 7 {
		idle = nextIdleEnds(idle, false)
		got = append(got, idlePatience(idle))
	}
	want := []time.Duration{eofPatience, 2 * eofPatience, 4 * eofPatience, 8 * eofPatience, maxEOFPatience, maxEOFPatience, maxEOFPatience}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("quiet end %d: patience %s, want %s (all: %v)", i+1, got[i], want[i], got)
		}
	}
	if idle = nextIdleEnds(idle, true); idlePatience(idle) != eofPatience {
		t.Fatalf("after a line, patience %s, want %s", idlePatience(idle), eofPatience)
	}
}
