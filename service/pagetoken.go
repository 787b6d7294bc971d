package service

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// Page tokens. A list's nextPageToken is Temporal's visibility page token sealed by
// this package: a version byte, a MAC, then Temporal's bytes, in unpadded base64url.
// The MAC (HMAC-SHA256, cut to 128 bits) covers the listing's scope (namespace and
// visibility query: workspace, kind and filters) and Temporal's bytes, under a key
// only the API servers hold. So a token the client made up, altered, or took from
// another listing (another workspace's) is refused with 400 naming pageToken before
// anything reaches Temporal; before, Temporal got the client's bytes as they were and
// a junk token hung the request for 10 s before a 503 (issue 33, finding 9).

// PageKeySource returns the key that seals page tokens, the same for every API server
// of an installation (api/server keeps it in NATS), so that a listing can go on at
// another server.
type PageKeySource func(ctx context.Context) ([]byte, error)

const (
	pageTokenVersion = 1
	pageTokenMACLen  = 16
	// pageKeyRetry is how long a failed PageKeySource is left alone before it is asked
	// again; meanwhile tokens are sealed with the process's own key.
	pageKeyRetry = 10 * time.Second
)

var pageTokenEncoding = base64.RawURLEncoding

// pageSealer seals and opens page tokens.
type pageSealer struct {
	source PageKeySource
	// local seals while source has not answered; it opens what it sealed for the
	// process's life.
	local []byte

	mu       sync.Mutex
	shared   []byte
	failedAt time.Time
}

func newPageSealer(source PageKeySource) *pageSealer {
	local := make([]byte, 32)
	_, _ = rand.Read(local) // never fails (crypto/rand)
	return &pageSealer{source: source, local: local}
}

// keys returns the key to seal with and every key that opens.
func (p *pageSealer) keys(ctx context.Context) (seal []byte, open [][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared == nil && p.source != nil && time.Since(p.failedAt) >= pageKeyRetry {
		key, err := p.source(ctx)
		if err == nil && len(key) >= 16 {
			p.shared = key
		} else {
			p.failedAt = time.Now()
		}
	}
	if p.shared != nil {
		return p.shared, [][]byte{p.shared, p.local}
	}
	return p.local, [][]byte{p.local}
}

func pageMAC(key []byte, scope string, inner []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("opendlc page token v1\x00"))
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(inner)
	return m.Sum(nil)[:pageTokenMACLen]
}

// seal makes Temporal's page token inner a client's token for the listing scope; an
// empty inner (the last page) stays empty.
func (p *pageSealer) seal(ctx context.Context, scope string, inner []byte) string {
	if len(inner) == 0 {
		return ""
	}
	key, _ := p.keys(ctx)
	raw := make([]byte, 0, 1+pageTokenMACLen+len(inner))
	raw = append(raw, pageTokenVersion)
	raw = append(raw, pageMAC(key, scope, inner)...)
	raw = append(raw, inner...)
	return pageTokenEncoding.EncodeToString(raw)
}

// open returns the Temporal page token a client's token for the listing scope seals,
// nil for an empty token, or ErrInvalid naming pageToken.
func (p *pageSealer) open(ctx context.Context, scope, token string) ([]byte, error) {
	if token == "" {
		return nil, nil
	}
	raw, err := decodePageToken(token)
	if err != nil {
		return nil, err
	}
	mac, inner := raw[1:1+pageTokenMACLen], raw[1+pageTokenMACLen:]
	_, open := p.keys(ctx)
	for _, key := range open {
		if hmac.Equal(mac, pageMAC(key, scope, inner)) {
			return bytes.Clone(inner), nil
		}
	}
	return nil, invalid("invalid page token", "pageToken",
		"not a nextPageToken of this listing: pass the previous page's nextPageToken with the same filters, or none to start again")
}

// CheckPageToken checks the form of a client's page token, as a query parameter
// check: "" when it may be one, else what is wrong. The MAC is checked when the list
// opens it.
func CheckPageToken(token string) string {
	if _, err := decodePageToken(token); err != nil {
		return "must be the previous page's nextPageToken, unchanged"
	}
	return ""
}

func decodePageToken(token string) ([]byte, error) {
	raw, err := pageTokenEncoding.DecodeString(token)
	if err != nil || len(raw) < 1+pageTokenMACLen+1 || raw[0] != pageTokenVersion {
		return nil, invalid("invalid page token", "pageToken", "must be the previous page's nextPageToken, unchanged")
	}
	return raw, nil
}

// SetPageKeySource makes page tokens sealed with source's key (see PageKeySource).
// Without it, each process seals with a key of its own, and a token is good only at
// the process that issued it, until it restarts.
func (s *Service) SetPageKeySource(source PageKeySource) {
	p := s.Jobs.pages
	p.mu.Lock()
	defer p.mu.Unlock()
	p.source, p.shared, p.failedAt = source, nil, time.Time{}
}
