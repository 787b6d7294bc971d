package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// This file keeps webhooks from reaching the platform's own network (request
// forgery): the dialer of the default webhook client checks every address it is about
// to connect to, after name resolution, so a name that resolves to an internal address
// (DNS rebinding included) is refused as surely as a literal one.

// ErrDestinationRefused is returned (wrapped) for a webhook whose address lies in a
// range webhooks may not reach and that the allow-list does not name.
var ErrDestinationRefused = errors.New("webhook destination refused")

// refusedRange is an address range webhooks may not reach without the allow-list.
type refusedRange struct {
	prefix netip.Prefix
	why    string
}

// refusedRanges are the ranges besides those netip.Addr classifies (loopback, private,
// link-local, multicast, unspecified): special-purpose blocks of RFC 6890 that reach
// the local network or nothing public.
var refusedRanges = []refusedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (an IPv4 address behind it)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
}

// RefusedReason says why webhooks may not reach addr without the allow-list: loopback,
// private, link-local, multicast, unspecified or another special-purpose range; "" when
// addr is an ordinary public address. An IPv4-mapped IPv6 address is judged as the IPv4
// address it carries.
func RefusedReason(addr netip.Addr) string {
	a := addr.Unmap()
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range refusedRanges {
		if r.prefix.Contains(a) {
			return r.why
		}
	}
	return ""
}

// AllowList names the internal destinations an administrator lets webhooks reach:
// address ranges (CIDR, or one IP address) and host:port pairs (a name as the URL
// writes it, or an IP address, with the port).
type AllowList struct {
	prefixes  []netip.Prefix
	hostPorts map[string]bool // lower-case host:port, IPv6 in brackets
}

// ParseAllowList reads allow-list entries: "10.0.0.0/8", "fd00::/8", "127.0.0.1",
// "hooks.internal:8443", "[::1]:9000", "127.0.0.1:8080". An empty list allows nothing.
func ParseAllowList(entries []string) (*AllowList, error) {
	l := &AllowList{hostPorts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			l.prefixes = append(l.prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			l.prefixes = append(l.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("notify: webhook allow-list entry %q: want a CIDR (10.0.0.0/8), an IP address or host:port", e)
		}
		l.hostPorts[hostPortKey(host, port)] = true
	}
	return l, nil
}

// hostPortKey is the allow-list key of host and port.
func hostPortKey(host, port string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port)
}

// allowsHostPort reports whether the list names addr ("host:port") as written.
func (l *AllowList) allowsHostPort(addr string) bool {
	if l == nil || len(l.hostPorts) == 0 {
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	return err == nil && l.hostPorts[hostPortKey(host, port)]
}

// allowsAddr reports whether the list names the resolved address ap.
func (l *AllowList) allowsAddr(ap netip.AddrPort) bool {
	if l == nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range l.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return l.hostPorts[hostPortKey(a.String(), strconv.FormatUint(uint64(ap.Port()), 10))]
}

// checkDial decides whether a connection to the resolved address may be made; byName
// says the allow-list named the host:port the request was for.
func (l *AllowList) checkDial(address string, byName bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address and port", ErrDestinationRefused, address)
	}
	why := RefusedReason(ap.Addr())
	if why == "" || byName || l.allowsAddr(ap) {
		return nil
	}
	return fmt.Errorf("%w: %s is %s; an administrator may allow it with dlc up --webhook-allow", ErrDestinationRefused, ap.Addr().Unmap(), why)
}

// guardedDialContext returns a DialContext that refuses what l does not allow. The check
// runs in the dialer's Control function, on the address actually connected to.
func guardedDialContext(l *AllowList) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		byName := l.allowsHostPort(addr)
		d := net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
			Control: func(_, address string, _ syscall.RawConn) error {
				return l.checkDial(address, byName)
			},
		}
		return d.DialContext(ctx, network, addr)
	}
}

// newWebhookClient is the default client of webhook requests: no proxy (a proxy would
// reach what the dialer refuses), the guarded dialer, no redirects (a 3xx answer is a
// failed attempt), and up to perHost idle connections per host.
func newWebhookClient(allow *AllowList, perHost int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = guardedDialContext(allow)
	t.MaxIdleConnsPerHost = perHost
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// maxReason bounds the error kept in a dead letter.
const maxReason = 300

// deadLetterReason is err's text as a dead letter (which the workspace reads) keeps
// it: without what it tells of the platform's own network, the resolver that answered
// a lookup ("lookup x.example on 10.0.0.2:53: no such host" keeps "lookup x.example:
// no such host") and the dispatcher's own address on a connection ("read tcp
// 10.1.2.3:4567->203.0.113.9:443" keeps "read tcp 203.0.113.9:443"); then
// sanitizeReason.
func deadLetterReason(err error) string {
	msg := err.Error()
	walkErrors(err, func(e error) {
		switch e := e.(type) { //nolint:errorlint // walkErrors visits each link of the chain
		case *net.DNSError:
			if e.Server != "" {
				msg = strings.ReplaceAll(msg, " on "+e.Server, "")
			}
		case *net.OpError:
			switch {
			case e.Source == nil:
			case e.Addr != nil:
				msg = strings.ReplaceAll(msg, e.Source.String()+"->", "")
			default:
				msg = strings.ReplaceAll(msg, " "+e.Source.String(), "")
			}
		}
	})
	return sanitizeReason(msg)
}

// walkErrors calls fn on err and every error it wraps.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) { //nolint:errorlint // walking the chain by hand, one link at a time
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	}
}

// sanitizeReason makes an error message fit for a dead letter, which the workspace
// reads: valid UTF-8, no control characters, at most maxReason bytes.
func sanitizeReason(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// httpStatusError is a webhook's non-2xx answer. Only the status is kept: the body is
// the endpoint's, and a dead letter must not carry what an internal service said.
type httpStatusError struct{ code int }

func (e httpStatusError) Error() string {
	if t := http.StatusText(e.code); t != "" {
		return fmt.Sprintf("HTTP %d %s", e.code, t)
	}
	return fmt.Sprintf("HTTP %d", e.code)
}
