// Package freeport hands out free loopback TCP ports for servers that are started a
// moment later.
//
// A port is chosen some time before its server binds it: a gang's rendezvous port is
// bound by rank 0 once the interpreter and the framework have loaded, a cluster of NATS
// servers needs every server's ports before the first starts. In between the port is
// free, and a port from the kernel's ephemeral range (what listening on port 0 gives)
// can be handed to any outgoing connection on the machine; on a busy machine that
// happens, and the server fails with "address already in use". So ports come from just
// below the ephemeral range, which the kernel never hands out by itself: each is checked
// free by binding it (all held until every one is found), and a port handed out is not
// handed out again by this process for Quarantine.
package freeport

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

// span is how many ports below the ephemeral range the choice is made from.
const span = 8192

// Quarantine is how long a port handed out is not handed out again by this process.
const Quarantine = 10 * time.Minute

var recent = struct {
	sync.Mutex
	at map[int]time.Time
}{at: map[int]time.Time{}}

// Range is the range ports come from, [lo, hi): the span ports below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), or nothing when the range cannot be
// read or leaves no room above the privileged ports.
func Range() (lo, hi int) {
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
	lo = max(hi-span, 1024)
	if hi-lo < 256 {
		return 0, 0
	}
	return lo, hi
}

// Take returns n distinct free ports on 127.0.0.1, from Range where it can (else the
// kernel's choice).
func Take(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := Range()
	recent.Lock()
	defer recent.Unlock()
	now := time.Now()
	for p, at := range recent.at {
		if now.Sub(at) > Quarantine {
			delete(recent.at, p)
		}
	}
	for range n {
		l, err := listen(lo, hi, now)
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		ports = append(ports, port)
		recent.at[port] = now
	}
	return ports, nil
}

// One returns one free port, as Take.
func One() (int, error) {
	ports, err := Take(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// listen listens on a random free port of [lo, hi) not handed out lately, or on one the
// kernel picks when the range is empty or 200 tries find none. recent is locked.
func listen(lo, hi int, now time.Time) (net.Listener, error) {
	if hi > lo {
		for range 200 {
			p := lo + rand.IntN(hi-lo) //nolint:gosec // spreading ports, not a secret
			if at, ok := recent.at[p]; ok && now.Sub(at) <= Quarantine {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}
