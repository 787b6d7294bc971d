package notify

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
)

// Issue 33, finding 9: dead letters showed the internal resolver's address. What a
// dead letter keeps of a network error names the destination, never the resolver or
// the dispatcher's own address.
func TestDeadLetterReasonHidesTheNetwork(t *testing.T) {
	lookup := &url.Error{Op: "Post", URL: "https://hooks.example/x", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "hooks.example", Server: "10.255.255.53:53", IsNotFound: true}}}
	reset := &url.Error{Op: "Post", URL: "https://hooks.example/x", Err: &net.OpError{Op: "read", Net: "tcp",
		Source: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 45678},
		Addr:   &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 443}, Err: errors.New("connection reset by peer")}}
	for _, tc := range []struct {
		err        error
		want, hide string
	}{
		{lookup, `Post "https://hooks.example/x": dial tcp: lookup hooks.example: no such host`, "10.255.255.53"},
		{fmt.Errorf("attempt 3: %w", lookup), `attempt 3: Post "https://hooks.example/x": dial tcp: lookup hooks.example: no such host`, "10.255.255.53"},
		{reset, `Post "https://hooks.example/x": read tcp 203.0.113.9:443: connection reset by peer`, "10.1.2.3"},
		{httpStatusError{502}, "HTTP 502 Bad Gateway", ""},
	} {
		got := deadLetterReason(tc.err)
		if got != tc.want {
			t.Errorf("reason %q, want %q", got, tc.want)
		}
		if tc.hide != "" && strings.Contains(got, tc.hide) {
			t.Errorf("reason %q shows %s", got, tc.hide)
		}
	}
}
