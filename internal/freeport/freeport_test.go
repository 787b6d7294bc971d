package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports come from below the kernel's ephemeral range (which outgoing connections draw
// from), are distinct within a call and across calls one after the other, and are free
// when handed out.
func TestPortsComeFromBelowTheEphemeralRange(t *testing.T) {
	lo, hi := Range()
	if hi-lo < 256 {
		t.Fatalf("port range [%d, %d): this machine's ip_local_port_range leaves no room", lo, hi)
	}
	seen := map[int]bool{}
	for range 20 {
		ports, err := Take(3)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 3 {
			t.Fatalf("Take(3) gave %d ports", len(ports))
		}
		for _, p := range ports {
			if p < lo || p >= hi {
				t.Errorf("port %d outside [%d, %d)", p, lo, hi)
			}
			if seen[p] {
				t.Errorf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Errorf("port %d is not free: %v", p, err)
				continue
			}
			l.Close()
		}
	}
}
