package server

import (
	"container/list"
	"crypto/sha256"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
)

// RateLimits bound what one client address can make the server do without a valid
// token. The zero value of a field takes its default.
type RateLimits struct {
	// AuthFailures is the rate at which an address regains failed authentications
	// once it has spent AuthBurst of them; past that, its requests are answered 429
	// with Retry-After before any token is looked up, but for tokens this server
	// accepted lately (the last 10,000), which are checked as ever. Default 1 every
	// 2 s, burst 20.
	AuthFailures rate.Limit
	AuthBurst    int
	// AuditRate and AuditBurst bound the audit records of refused anonymous calls per
	// address. Past the limit the calls are only counted, and one summary record per
	// address every SummaryEvery says how many were suppressed. Default 1 every 10 s,
	// burst 10, a summary every 30 s.
	AuditRate    rate.Limit
	AuditBurst   int
	SummaryEvery time.Duration
	// MaxAddrs bounds how many addresses the limiter remembers (least recently seen
	// forgotten first), so that the limiter itself cannot exhaust memory. Default
	// 10000.
	MaxAddrs int
	// TrustedProxies are the networks of reverse proxies whose X-Forwarded-For header
	// names the client. Default none: the client is the TCP peer's address, so behind
	// a proxy every client shares the proxy's limits until its network is listed here.
	TrustedProxies []netip.Prefix
}

func (l RateLimits) withDefaults() RateLimits {
	if l.AuthFailures == 0 {
		l.AuthFailures = 0.5
	}
	if l.AuthBurst == 0 {
		l.AuthBurst = 20
	}
	if l.AuditRate == 0 {
		l.AuditRate = 0.1
	}
	if l.AuditBurst == 0 {
		l.AuditBurst = 10
	}
	if l.SummaryEvery == 0 {
		l.SummaryEvery = 30 * time.Second
	}
	if l.MaxAddrs == 0 {
		l.MaxAddrs = 10000
	}
	return l
}

// WithRateLimits sets the per-address limits on failed authentication and on audit
// records of refused anonymous calls. Default: RateLimits' defaults.
func WithRateLimits(l RateLimits) Option { return func(o *Options) { o.RateLimits = l } }

// addrState is what the limiter remembers of one client address.
type addrState struct {
	key      string
	failures *rate.Limiter // failed authentications
	audits   *rate.Limiter // audit records of refused anonymous calls
	// suppressed counts the refused anonymous calls not audited since the last summary.
	suppressed int64
	since      time.Time
}

// abuseLimiter keeps an addrState per client address, in least-recently-used order.
type abuseLimiter struct {
	cfg RateLimits
	// summarize publishes the summary record of an address's suppressed calls.
	summarize func(addr string, n int64, since time.Time)

	mu    sync.Mutex
	addrs map[string]*list.Element // of *addrState
	lru   *list.List
	// sweeping is set while a goroutine flushes summaries every SummaryEvery.
	sweeping bool
	// known are the tokens this server accepted lately, by SHA-256, least recently
	// used last: they are still checked when their address is locked out.
	known    map[[sha256.Size]byte]*list.Element // of [sha256.Size]byte
	knownLRU *list.List
}

// maxKnownTokens bounds how many accepted tokens the limiter remembers.
const maxKnownTokens = 10000

func newAbuseLimiter(cfg RateLimits, summarize func(string, int64, time.Time)) *abuseLimiter {
	return &abuseLimiter{cfg: cfg.withDefaults(), summarize: summarize, addrs: map[string]*list.Element{}, lru: list.New(),
		known: map[[sha256.Size]byte]*list.Element{}, knownLRU: list.New()}
}

// accepted remembers a token the server accepted.
func (l *abuseLimiter) accepted(token string) {
	h := sha256.Sum256([]byte(token))
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.known[h]; ok {
		l.knownLRU.MoveToFront(e)
		return
	}
	if l.knownLRU.Len() >= maxKnownTokens {
		oldest := l.knownLRU.Back()
		l.knownLRU.Remove(oldest)
		delete(l.known, oldest.Value.([sha256.Size]byte))
	}
	l.known[h] = l.knownLRU.PushFront(h)
}

// isKnown reports whether the server accepted token lately.
func (l *abuseLimiter) isKnown(token string) bool {
	h := sha256.Sum256([]byte(token))
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.known[h]
	return ok
}

// forget drops a token that is no longer accepted (revoked, expired).
func (l *abuseLimiter) forget(token string) {
	h := sha256.Sum256([]byte(token))
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.known[h]; ok {
		l.knownLRU.Remove(e)
		delete(l.known, h)
	}
}

// state returns key's state, making it (and forgetting the least recently seen address
// when full) if needed. The caller holds mu; evicted states with suppressed calls are
// returned so that their summary is not lost.
func (l *abuseLimiter) state(key string) (*addrState, *addrState) {
	if e, ok := l.addrs[key]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*addrState), nil
	}
	var evicted *addrState
	if l.lru.Len() >= l.cfg.MaxAddrs {
		oldest := l.lru.Back()
		l.lru.Remove(oldest)
		st := oldest.Value.(*addrState)
		delete(l.addrs, st.key)
		if st.suppressed > 0 {
			evicted = st
		}
	}
	st := &addrState{key: key,
		failures: rate.NewLimiter(l.cfg.AuthFailures, l.cfg.AuthBurst),
		audits:   rate.NewLimiter(l.cfg.AuditRate, l.cfg.AuditBurst)}
	l.addrs[key] = l.lru.PushFront(st)
	return st, evicted
}

func (l *abuseLimiter) flushEvicted(st *addrState) {
	if st != nil {
		l.summarize(st.key, st.suppressed, st.since)
	}
}

// retryAfter is how long key must wait before its next authentication is tried; 0
// when it may try now.
func (l *abuseLimiter) retryAfter(key string, now time.Time) time.Duration {
	l.mu.Lock()
	st, evicted := l.state(key)
	tokens := st.failures.TokensAt(now)
	l.mu.Unlock()
	l.flushEvicted(evicted)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(l.cfg.AuthFailures) * float64(time.Second))
}

// failed spends one of key's failed authentications.
func (l *abuseLimiter) failed(key string, now time.Time) {
	l.mu.Lock()
	st, evicted := l.state(key)
	st.failures.AllowN(now, 1)
	l.mu.Unlock()
	l.flushEvicted(evicted)
}

// audit reports whether a refused anonymous call from key is audited; when it is not,
// it is counted for the next summary.
func (l *abuseLimiter) audit(key string, now time.Time) bool {
	l.mu.Lock()
	st, evicted := l.state(key)
	ok := st.audits.AllowN(now, 1)
	if !ok {
		if st.suppressed == 0 {
			st.since = now
		}
		st.suppressed++
		if !l.sweeping {
			l.sweeping = true
			go l.sweep()
		}
	}
	l.mu.Unlock()
	l.flushEvicted(evicted)
	return ok
}

// sweep publishes a summary for every address with suppressed calls every
// SummaryEvery, and stops once a round finds none.
func (l *abuseLimiter) sweep() {
	t := time.NewTicker(l.cfg.SummaryEvery)
	defer t.Stop()
	for range t.C {
		type pending struct {
			key   string
			n     int64
			since time.Time
		}
		var due []pending
		l.mu.Lock()
		for _, e := range l.addrs {
			st := e.Value.(*addrState)
			if st.suppressed > 0 {
				due = append(due, pending{st.key, st.suppressed, st.since})
				st.suppressed = 0
			}
		}
		if len(due) == 0 {
			l.sweeping = false
		}
		l.mu.Unlock()
		if len(due) == 0 {
			return
		}
		for _, p := range due {
			l.summarize(p.key, p.n, p.since)
		}
	}
}

// clientKey is the address a request's limits are kept under: the TCP peer's IP, or
// the client named by X-Forwarded-For when the peer is a trusted proxy. IPv6 clients
// are kept per /64, the smallest network a host is usually given, so that rotating
// addresses within it does not escape the limit.
func (l *abuseLimiter) clientKey(r *http.Request) string {
	addr := peerAddr(r.RemoteAddr)
	if addr.IsValid() && l.trusted(addr) {
		// The rightmost address that is not a trusted proxy is the client as the
		// nearest untrusted hop saw it; addresses left of it can be forged.
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for _, h := range slices.Backward(hops) {
			hop, err := netip.ParseAddr(strings.TrimSpace(h))
			if err != nil {
				break
			}
			addr = hop.Unmap()
			if !l.trusted(addr) {
				break
			}
		}
	}
	if !addr.IsValid() {
		return r.RemoteAddr
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func (l *abuseLimiter) trusted(a netip.Addr) bool {
	for _, p := range l.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr parses the IP of an http.Request's RemoteAddr ("ip:port").
func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// authenticateLimited is authenticate behind the per-address limit on failed
// authentication: an address over it is answered 429 with Retry-After, and its token
// is not looked up, unless the server accepted that very token lately: the lockout is
// kept per address and token, so that someone else's bad guesses from the same address
// (a NAT, a shared host, a /64) do not lock out a token in use. Checking a token the
// server knows costs no lookup (the token store holds it in memory), and a guess
// never matches a known token's hash, so this lets no guessing through.
func (s *Server) authenticateLimited(w http.ResponseWriter, r *http.Request, st *request) bool {
	key := s.limits.clientKey(r)
	token := bearerToken(r)
	if wait := s.limits.retryAfter(key, time.Now()); wait > 0 && (token == "" || !s.limits.isKnown(token)) {
		secs := int64(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeError(w, http.StatusTooManyRequests, api.Error{Code: api.CodeTooManyRequests,
			Message: fmt.Sprintf("too many failed authentications from %s; retry in %d s", key, secs)})
		return false
	}
	if s.authenticate(w, r, st) {
		if token != "" {
			s.limits.accepted(token)
		}
		return true
	}
	if rec, ok := w.(*recorder); ok && rec.status == http.StatusUnauthorized {
		s.limits.failed(key, time.Now())
		if token != "" {
			s.limits.forget(token)
		}
	}
	return false
}

// bearerToken is the request's well-formed bearer token, or "".
func bearerToken(r *http.Request) string {
	header := r.Header.Get("Authorization")
	if header == "" {
		return ""
	}
	token, err := auth.ParseBearer(header)
	if err != nil {
		return ""
	}
	return token
}

// auditAllowed reports whether a call is audited: every authenticated call is; a
// refused anonymous one only within its address's audit limit.
func (s *Server) auditAllowed(r *http.Request, st *request) bool {
	return st.authenticated || s.limits.audit(s.limits.clientKey(r), time.Now())
}

// auditSuppressed publishes the summary record of an address's suppressed audit
// records: one event on the system audit subject, with the count in Suppressed.
func (s *Server) auditSuppressed(addr string, n int64, since time.Time) {
	now := time.Now()
	data := events.AuditData{
		RequestID:  newRequestID(),
		Actor:      "anonymous",
		Method:     "-",
		Path:       "-",
		RemoteAddr: addr,
		Status:     http.StatusUnauthorized,
		Code:       api.CodeUnauthenticated,
		Suppressed: n,
		Summary:    fmt.Sprintf("%d refused anonymous requests from %s suppressed since %s", n, addr, since.UTC().Format(time.RFC3339)),
	}
	s.opts.Logger.Warn("audit suppressed", "remote", addr, "count", n, "since", since)
	s.publishAudit("system", data.RequestID, now, data)
}
