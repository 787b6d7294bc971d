package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/opendlc/opendlc/api"
)

// Cookie names. The session cookie holds only a random session id: the API token it
// stands for stays in the server's memory.
const (
	sessionCookie = "dlc_session"
	// loginCookie carries the sign-in form's CSRF token (double submit), as there is
	// no session yet.
	loginCookie = "dlc_login"
	// csrfField is the form field (and csrfHeader the header, for scripts) that
	// carries the CSRF token of every mutating request.
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// session is one signed-in browser: the API token it uses, whose identity it is, and
// the CSRF token its forms carry.
type session struct {
	id, csrf, token string
	who             api.Identity
	expires         time.Time
}

// sessions are the signed-in browsers, in memory: a restarted server signs everyone out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	// ttl bounds a session; a token that expires sooner ends it sooner.
	ttl time.Duration
	now func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, ttl: ttl, now: time.Now}
}

// randomToken is 32 random bytes, URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for token, which the API said is who's.
func (s *sessions) create(token string, who api.Identity) *session {
	now := s.now()
	exp := now.Add(s.ttl)
	if who.ExpiresAt != nil && who.ExpiresAt.Before(exp) {
		exp = *who.ExpiresAt
	}
	ss := &session{id: randomToken(), csrf: randomToken(), token: token, who: who, expires: exp}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, old := range s.byID {
		if !now.Before(old.expires) {
			delete(s.byID, id)
		}
	}
	s.byID[ss.id] = ss
	return ss
}

// get returns the live session of id, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.byID[id]
	if ss == nil {
		return nil
	}
	if !s.now().Before(ss.expires) {
		delete(s.byID, id)
		return nil
	}
	return ss
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// cookie is a console cookie: HttpOnly, SameSite=Strict, limited to /ui/, and Secure
// when the server serves TLS. maxAge < 0 deletes it.
func (c *Console) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: c.opts.TLS, SameSite: http.SameSiteStrictMode}
}

// sessionOf returns the request's live session, or nil.
func (c *Console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// equalTokens compares two secrets in constant time; empty never matches.
func equalTokens(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// sameOrigin refuses a request whose Origin (or, without one, Referer) header names
// another site than the one it was sent to. Browsers send Origin with every POST; a
// request without either header (not from a browser) passes to the token check.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = r.Header.Get("Referer")
	}
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// checkCSRF is the CSRF check of a mutating request of a signed-in session: the
// request's token (form field or header) must be the session's, and it must come from
// this site.
func checkCSRF(r *http.Request, ss *session) bool {
	tok := r.Header.Get(csrfHeader)
	if tok == "" {
		tok = r.PostFormValue(csrfField)
	}
	return sameOrigin(r) && equalTokens(tok, ss.csrf)
}
