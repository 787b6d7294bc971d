package local

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rendezvous ports. A gang's ports are chosen when it is laid out and bound by its rank 0
// seconds later, once the interpreter and the framework have loaded; in between the port
// is free. A port from the kernel's ephemeral range (what listening on port 0 gives) can
// be handed, in those seconds, to any outgoing connection on the machine, and on a busy
// one that happens: rank 0 then fails with "address already in use" and the job restarts
// for nothing. So the ports come from just below the ephemeral range, which the kernel
// never hands out by itself: each is checked free by binding it (all held until every
// name has one), and one handed out is not handed out again by this process for
// portQuarantine, so that two gangs laid out at once never share one either.

// portSpan is how many ports below the ephemeral range the choice is made from.
const portSpan = 8192

// portQuarantine is how long a port handed out is not handed out again.
const portQuarantine = 10 * time.Minute

var recentPorts = struct {
	sync.Mutex
	at map[int]time.Time
}{at: map[int]time.Time{}}

// portRange is the range rendezvous ports come from, [lo, hi): the portSpan ports below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range), or nothing when the range
// cannot be read or leaves no room above the privileged ports.
func portRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	ephemeralLow, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0
	}
	hi = ephemeralLow
	lo = max(hi-portSpan, 1024)
	if hi-lo < 256 {
		return 0, 0
	}
	return lo, hi
}

// allocatePorts returns a free loopback port per name, distinct, outside the ephemeral
// range where it can be (else from the kernel's choice, as before).
func allocatePorts(names []string) (map[string]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ports := make(map[string]int, len(names))
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := portRange()
	recentPorts.Lock()
	defer recentPorts.Unlock()
	now := time.Now()
	for p, at := range recentPorts.at {
		if now.Sub(at) > portQuarantine {
			delete(recentPorts.at, p)
		}
	}
	for _, name := range names {
		l, err := listenBelowEphemeral(lo, hi, now)
		if err != nil {
			return nil, fmt.Errorf("local: allocate port %q: %w", name, err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		ports[name] = port
		recentPorts.at[port] = now
	}
	return ports, nil
}

// listenBelowEphemeral listens on a random free port of [lo, hi) not handed out lately,
// or on one the kernel picks when the range is empty or 200 tries find none.
// recentPorts is locked.
func listenBelowEphemeral(lo, hi int, now time.Time) (net.Listener, error) {
	if hi > lo {
		for range 200 {
			p := lo + rand.IntN(hi-lo) //nolint:gosec // spreading ports, not a secret
			if at, ok := recentPorts.at[p]; ok && now.Sub(at) <= portQuarantine {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}
