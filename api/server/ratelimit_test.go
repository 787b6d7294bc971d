package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/internal/testutil"
)

// countingAuth counts the token lookups of fakeAuth.
type countingAuth struct {
	fakeAuth
	n atomic.Int64
}

func (c *countingAuth) Authenticate(ctx context.Context, token string) (api.Identity, error) {
	c.n.Add(1)
	return c.fakeAuth.Authenticate(ctx, token)
}

func callFrom(h http.Handler, addr, method, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, http.NoBody)
	req.RemoteAddr = addr
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestFailedAuthenticationIsRateLimitedPerAddress: an address that failed
// authentication AuthBurst times is answered 429 with Retry-After, and its tokens are
// no longer looked up, even a valid one; another address is not affected.
func TestFailedAuthenticationIsRateLimitedPerAddress(t *testing.T) {
	authn := &countingAuth{fakeAuth: fakeAuth{}}
	good := authn.token(t, "ci", "default", api.RoleMember)
	s := testServer(nil, nil, WithRateLimits(RateLimits{AuthFailures: 0.01, AuthBurst: 3}))
	s.authn = authn
	h := s.Handler()
	const attacker, other = "203.0.113.7:4000", "198.51.100.2:5000"
	bad := "dlc_" + fmt.Sprintf("%064d", 0)
	for i := range 3 {
		if rec := callFrom(h, attacker, http.MethodGet, "/v1/workspaces/default/jobs", bad); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s, want 401", i+1, rec.Code, rec.Body)
		}
	}
	lookups := authn.n.Load()
	for _, tok := range []string{bad, "", good} {
		rec := callFrom(h, attacker, http.MethodGet, "/v1/workspaces/default/jobs", tok)
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("over the limit with token %q: %d %s, want 429", tok, rec.Code, rec.Body)
		}
		secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
		if err != nil || secs < 1 || secs > 100 {
			t.Fatalf("Retry-After %q, want 1..100 s (one failure back at 0.01/s)", rec.Header().Get("Retry-After"))
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != api.CodeTooManyRequests {
			t.Fatalf("429 body %s (%v)", rec.Body, err)
		}
	}
	if n := authn.n.Load(); n != lookups {
		t.Fatalf("%d token lookups over the limit, want none", n-lookups)
	}
	if rec := callFrom(h, other, http.MethodGet, "/v1/whoami", good); rec.Code == http.StatusTooManyRequests || rec.Code == http.StatusUnauthorized {
		t.Fatalf("another address with a good token: %d %s", rec.Code, rec.Body)
	}
	// Successful calls spend nothing.
	s2 := testServer(nil, nil, WithRateLimits(RateLimits{AuthFailures: 0.01, AuthBurst: 1}))
	s2.authn = authn
	h2 := s2.Handler()
	for i := range 10 {
		if rec := callFrom(h2, attacker, http.MethodGet, "/v1/whoami", good); rec.Code != http.StatusOK {
			t.Fatalf("good call %d: %d %s", i, rec.Code, rec.Body)
		}
	}
}

// Issue 33, finding 9: a valid token was locked out by bad guesses from the same
// address. The lockout now lets through a token the server accepted lately (checked
// as ever, costing no lookup in the store): someone else's guesses from a shared
// address no longer lock it out, while the guesses, tokens the server never accepted
// and the known token's id with another secret still get 429 without a lookup; a
// known token revoked meanwhile is refused and forgotten.
func TestLockoutSparesTokensInUse(t *testing.T) {
	authn := &countingAuth{fakeAuth: fakeAuth{}}
	inUse := authn.token(t, "ci", "default", api.RoleMember)
	unseen := authn.token(t, "new", "default", api.RoleMember)
	s := testServer(nil, nil, WithRateLimits(RateLimits{AuthFailures: 0.01, AuthBurst: 3}))
	s.authn = authn
	h := s.Handler()
	const shared = "203.0.113.7:4000" // a NAT: the user and the guesser share it
	if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", inUse); rec.Code != http.StatusOK {
		t.Fatalf("the token in use before the guesses: %d %s", rec.Code, rec.Body)
	}
	for i := range 20 {
		bad := "dlc_" + fmt.Sprintf("%064d", i)
		if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", bad); rec.Code != http.StatusUnauthorized && rec.Code != http.StatusTooManyRequests {
			t.Fatalf("guess %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	for i := range 5 {
		if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", inUse); rec.Code != http.StatusOK {
			t.Fatalf("the token in use after the guesses, call %d: %d %s, want 200", i, rec.Code, rec.Body)
		}
	}
	lookups := authn.n.Load()
	sameID := inUse[:len(inUse)-4] + "AAAA"
	if sameID == inUse {
		sameID = inUse[:len(inUse)-4] + "BBBB"
	}
	for name, tok := range map[string]string{"a guess": "dlc_" + fmt.Sprintf("%064d", 99), "a token never accepted": unseen,
		"the known id with another secret": sameID, "no token": ""} {
		if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", tok); rec.Code != http.StatusTooManyRequests {
			t.Errorf("%s while locked out: %d %s, want 429", name, rec.Code, rec.Body)
		}
	}
	if n := authn.n.Load(); n != lookups {
		t.Errorf("%d token lookups for the locked-out calls, want none", n-lookups)
	}
	delete(authn.fakeAuth, inUse) // revoked
	if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", inUse); rec.Code != http.StatusUnauthorized {
		t.Errorf("the revoked token: %d %s, want 401", rec.Code, rec.Body)
	}
	if rec := callFrom(h, shared, http.MethodGet, "/v1/whoami", inUse); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the revoked token again: %d %s, want 429 (forgotten)", rec.Code, rec.Body)
	}
}

// TestRefusedAnonymousAuditIsSummarized: a flood of refused anonymous calls from one
// address leaves AuditBurst records and then summary records that count the rest;
// every call is accounted for.
func TestRefusedAnonymousAuditIsSummarized(t *testing.T) {
	pub := &recordingPublisher{}
	s := testServer(nil, fakeAuth{}, WithRateLimits(RateLimits{AuthBurst: 1 << 20, AuditRate: 0.001, AuditBurst: 5, SummaryEvery: 20 * time.Millisecond}))
	s.auditPub = pub
	h := s.Handler()
	const flood = 1000
	for range flood {
		if rec := callFrom(h, "203.0.113.9:1", http.MethodPost, "/v1/jobs", "dlc_bad"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the flood's audit records", func() error {
		if records, suppressed := auditCounts(t, pub); records != 5 || suppressed != flood-5 {
			return fmt.Errorf("%d records and %d suppressed, want 5 and %d", records, suppressed, flood-5)
		}
		return nil
	})
	pub.mu.Lock()
	n := len(pub.msgs)
	pub.mu.Unlock()
	if n > 5+10 {
		t.Fatalf("%d audit events for a flood of %d, want the 5 allowed and a few summaries", n, flood)
	}
}

// auditCounts reads the published audit events: how many are records of single calls,
// and how many calls the summaries say were suppressed.
func auditCounts(t *testing.T, pub *recordingPublisher) (records int, suppressed int64) {
	t.Helper()
	pub.mu.Lock()
	defer pub.mu.Unlock()
	for _, m := range pub.msgs {
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		var d events.AuditData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Suppressed > 0 {
			suppressed += d.Suppressed
			if d.RemoteAddr != "203.0.113.9" || d.Summary == "" {
				t.Fatalf("summary record %+v", d)
			}
		} else {
			records++
		}
	}
	return records, suppressed
}

// TestAbuseLimiterIsBounded: the limiter remembers at most MaxAddrs addresses, and an
// address forgotten with suppressed calls still gets its summary.
func TestAbuseLimiterIsBounded(t *testing.T) {
	var summarized atomic.Int64
	l := newAbuseLimiter(RateLimits{MaxAddrs: 100, AuditBurst: 1, AuditRate: 0.001, SummaryEvery: time.Hour},
		func(_ string, n int64, _ time.Time) { summarized.Add(n) })
	now := time.Now()
	for i := range 100_000 {
		key := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
		l.failed(key, now)
		l.audit(key, now)
		l.audit(key, now) // suppressed
	}
	l.mu.Lock()
	n, m := len(l.addrs), l.lru.Len()
	l.mu.Unlock()
	if n > 100 || m != n {
		t.Fatalf("%d addresses remembered (list %d), want at most 100", n, m)
	}
	if got := summarized.Load(); got != 100_000-100 {
		t.Fatalf("%d suppressed calls summarized on eviction, want %d", got, 100_000-100)
	}
}

// TestClientKey: the TCP peer by default; X-Forwarded-For only from a trusted proxy,
// read from the right; IPv6 per /64.
func TestClientKey(t *testing.T) {
	l := newAbuseLimiter(RateLimits{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, nil)
	for _, tc := range []struct{ remote, xff, want string }{
		{"203.0.113.1:80", "", "203.0.113.1"},
		{"203.0.113.1:80", "198.51.100.1", "203.0.113.1"}, // untrusted peer: header ignored
		{"10.1.2.3:80", "198.51.100.1", "198.51.100.1"},
		{"10.1.2.3:80", "1.2.3.4, 198.51.100.1, 10.9.9.9", "198.51.100.1"}, // forged left part ignored
		{"10.1.2.3:80", "", "10.1.2.3"},
		{"10.1.2.3:80", "garbage", "10.1.2.3"},
		{"[2001:db8:1:2:3:4:5:6]:80", "", "2001:db8:1:2::/64"},
		{"[::ffff:203.0.113.5]:80", "", "203.0.113.5"},
		{"@", "", "@"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", http.NoBody)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := l.clientKey(r); got != tc.want {
			t.Errorf("remote %s, X-Forwarded-For %q: key %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}
