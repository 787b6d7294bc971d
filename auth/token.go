// Package auth holds OpenDLC's identities: bearer tokens (random, shown once, stored
// only as SHA-256 hashes), the workspace registry, and the role policy the API server
// enforces. Tokens and workspaces live in the NATS key-value bucket DLC_AUTH.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors.
var (
	// ErrMalformedToken: the string is not an OpenDLC token at all.
	ErrMalformedToken = errors.New("auth: malformed token")
	// ErrUnknownToken: a well-formed token that is not (or no longer) stored: never
	// created, revoked, or a wrong secret.
	ErrUnknownToken = errors.New("auth: unknown token")
	// ErrExpiredToken: the token was valid and has expired.
	ErrExpiredToken = errors.New("auth: token expired")
	// ErrNotFound: no token or workspace of that name.
	ErrNotFound = errors.New("auth: not found")
	// ErrExists: a token or workspace of that name exists already.
	ErrExists = errors.New("auth: already exists")
)

// Token layout: "dlc_" + 16 hex digits of id + "_" + 43 base64url characters of a
// 32-byte secret. The id is public (it names the stored record, so a lookup is one
// key-value get); the secret is what proves possession.
const (
	tokenPrefix = "dlc_"
	idLen       = 16
	secretLen   = 43
	// TokenLen is the length of every token.
	TokenLen = len(tokenPrefix) + idLen + 1 + secretLen
)

var secretEncoding = base64.RawURLEncoding.Strict()

// NewToken returns a fresh random token and its id.
func NewToken() (token, id string, err error) {
	var idb [idLen / 2]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", fmt.Errorf("auth: random: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", "", fmt.Errorf("auth: random: %w", err)
	}
	id = hex.EncodeToString(idb[:])
	return tokenPrefix + id + "_" + secretEncoding.EncodeToString(secret[:]), id, nil
}

// ParseToken checks a token's form and returns its id. It does not look the token up.
func ParseToken(token string) (id string, err error) {
	if len(token) != TokenLen || !strings.HasPrefix(token, tokenPrefix) {
		return "", ErrMalformedToken
	}
	id = token[len(tokenPrefix) : len(tokenPrefix)+idLen]
	for _, c := range []byte(id) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", ErrMalformedToken
		}
	}
	if token[len(tokenPrefix)+idLen] != '_' {
		return "", ErrMalformedToken
	}
	secret, err := secretEncoding.DecodeString(token[len(tokenPrefix)+idLen+1:])
	if err != nil || len(secret) != 32 {
		return "", ErrMalformedToken
	}
	return id, nil
}

// ParseBearer extracts the token of an "Authorization: Bearer <token>" header value.
func ParseBearer(header string) (string, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMalformedToken
	}
	token = strings.TrimSpace(token)
	if _, err := ParseToken(token); err != nil {
		return "", err
	}
	return token, nil
}

// HashToken is the stored form of a token: hex SHA-256. Tokens carry 256 random bits,
// so a fast unsalted hash is enough: there is nothing to guess.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
