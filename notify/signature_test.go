package notify_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/notify"
)

func TestVerifySignature(t *testing.T) {
	secret := []byte("secret")
	body := []byte(`{"id":"x"}`)
	good := notify.Sign(secret, body)
	tests := map[string]struct {
		secret []byte
		body   []byte
		header string
		want   bool
	}{
		"valid":                 {secret: secret, body: body, header: good, want: true},
		"surrounding spaces":    {secret: secret, body: body, header: " " + good + " ", want: true},
		"uppercase hex":         {secret: secret, body: body, header: "sha256=" + strings.ToUpper(strings.TrimPrefix(good, "sha256=")), want: true},
		"wrong secret":          {secret: []byte("other"), body: body, header: good},
		"changed body":          {secret: secret, body: []byte(`{"id":"y"}`), header: good},
		"no prefix":             {secret: secret, body: body, header: strings.TrimPrefix(good, "sha256=")},
		"other algorithm":       {secret: secret, body: body, header: "sha1=" + strings.TrimPrefix(good, "sha256=")},
		"not hex":               {secret: secret, body: body, header: "sha256=zz"},
		"truncated":             {secret: secret, body: body, header: good[:len(good)-2]},
		"empty":                 {secret: secret, body: body, header: ""},
		"empty secret and body": {secret: nil, body: nil, header: notify.Sign(nil, nil), want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, notify.VerifySignature(tt.secret, tt.body, tt.header)); diff != "" {
				t.Errorf("VerifySignature (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSign checks Sign against an independent implementation:
// echo -n '{"id":"x"}' | openssl dgst -sha256 -hmac secret
func TestSign(t *testing.T) {
	want := "sha256=ebf5302b9c8bc5e255e0d2135c1a75138c004e631d57c70e6081aa366c1de3b9"
	if diff := cmp.Diff(want, notify.Sign([]byte("secret"), []byte(`{"id":"x"}`))); diff != "" {
		t.Errorf("Sign (-want +got):\n%s", diff)
	}
}
