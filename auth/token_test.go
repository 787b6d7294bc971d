package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/auth"
)

func TestNewTokenParses(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, id, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		got, err := auth.ParseToken(tok)
		if err != nil || got != id || len(tok) != auth.TokenLen {
			t.Fatalf("ParseToken(%q) = %q, %v; want %q", tok, got, err, id)
		}
		if seen[tok] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok] = true
	}
}

func TestParseTokenRefuses(t *testing.T) {
	good, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"empty":           "",
		"short":           good[:len(good)-1],
		"long":            good + "A",
		"prefix":          "xlc_" + good[4:],
		"upper hex id":    good[:4] + strings.ToUpper(good[4:20]) + good[20:],
		"separator":       good[:20] + "-" + good[21:],
		"secret alphabet": good[:len(good)-1] + "=",
		// The last base64 character of 32 bytes carries 2 unused bits; a strict
		// decoder refuses them set, so each token has one spelling.
		"non-canonical": good[:len(good)-1] + "B",
		"spaces":        " " + good[1:],
	}
	for name, tok := range tests {
		t.Run(name, func(t *testing.T) {
			if name == "non-canonical" && strings.HasSuffix(good, "B") {
				tok = good[:len(good)-1] + "C"
			}
			if _, err := auth.ParseToken(tok); !errors.Is(err, auth.ErrMalformedToken) {
				t.Errorf("ParseToken(%q) = %v, want ErrMalformedToken", tok, err)
			}
		})
	}
}

func TestParseBearer(t *testing.T) {
	good, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		header string
		ok     bool
	}{
		"bearer":         {"Bearer " + good, true},
		"case":           {"bearer " + good, true},
		"extra space":    {"Bearer  " + good, true},
		"basic":          {"Basic " + good, false},
		"no scheme":      {good, false},
		"empty":          {"", false},
		"token and more": {"Bearer " + good + " x", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tok, err := auth.ParseBearer(tt.header)
			if tt.ok != (err == nil) || tt.ok && tok != good {
				t.Errorf("ParseBearer(%q) = %q, %v", tt.header, tok, err)
			}
		})
	}
}

// FuzzTokenParse: parsing never panics; whatever parses is exactly one token of the
// canonical form, and its hash is 64 hex digits.
func FuzzTokenParse(f *testing.F) {
	good, _, err := auth.NewToken()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, "", "dlc_", "Bearer " + good, good[:40], strings.ToUpper(good), "dlc_0123456789abcdef_" + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := auth.ParseToken(s)
		if err != nil {
			if !errors.Is(err, auth.ErrMalformedToken) || id != "" {
				t.Fatalf("ParseToken(%q) = %q, %v", s, id, err)
			}
		} else {
			if len(s) != auth.TokenLen || !strings.HasPrefix(s, "dlc_"+id+"_") || len(id) != 16 {
				t.Fatalf("ParseToken accepted %q (id %q)", s, id)
			}
			if h := auth.HashToken(s); len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				t.Fatalf("HashToken(%q) = %q", s, h)
			}
		}
		tok, err := auth.ParseBearer(s)
		if err == nil {
			if _, err := auth.ParseToken(tok); err != nil || !strings.Contains(s, tok) {
				t.Fatalf("ParseBearer(%q) = %q, which does not parse: %v", s, tok, err)
			}
		}
	})
}
