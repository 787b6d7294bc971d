package local

import (
	"net"
	"strconv"
	"testing"
)

// Rendezvous ports come from below the kernel's ephemeral range (which outgoing
// connections draw from), are distinct within a gang and across gangs laid out one
// after the other, and are free when handed out.
func TestPortsComeFromBelowTheEphemeralRange(t *testing.T) {
	lo, hi := portRange()
	if hi-lo < 256 {
		t.Fatalf("port range [%d, %d): this machine's ip_local_port_range leaves no room", lo, hi)
	}
	seen := map[int]bool{}
	for range 20 {
		ports, err := allocatePorts([]string{"rendezvous", "ray-gcs", "master"})
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range ports {
			if p < lo || p >= hi {
				t.Errorf("%s: port %d outside [%d, %d)", name, p, lo, hi)
			}
			if seen[p] {
				t.Errorf("%s: port %d handed out twice", name, p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Errorf("%s: port %d is not free: %v", name, p, err)
				continue
			}
			l.Close()
		}
	}
}
