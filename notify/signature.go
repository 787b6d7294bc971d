package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// signaturePrefix names the algorithm in the X-OpenDLC-Signature header.
const signaturePrefix = "sha256="

// Sign returns the X-OpenDLC-Signature value of body: "sha256=" followed by the
// lowercase hex HMAC-SHA256 of body keyed with secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header, the X-OpenDLC-Signature of a webhook request,
// is the signature of body with secret. Receivers call it on the raw request body,
// before decoding it:
//
//	body, _ := io.ReadAll(r.Body)
//	if !notify.VerifySignature(secret, body, r.Header.Get(notify.HeaderSignature)) {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//
// The comparison takes constant time. The signature does not cover a timestamp: a
// receiver that must refuse replayed requests remembers the X-OpenDLC-Event-Id values
// it has seen, which it needs anyway to drop repeated deliveries.
func VerifySignature(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
