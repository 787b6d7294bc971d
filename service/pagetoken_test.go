package service

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A listing's next page token is Temporal's, sealed: the next page gives Temporal its
// own bytes back, and a token the client made up, altered, or took from another
// listing (another workspace, other filters) is refused as invalid, naming pageToken,
// without reaching Temporal (issue 33, finding 9).
func TestPageTokensSealed(t *testing.T) {
	tc := &fakeTemporal{}
	s := newTest(tc)
	ctx := context.Background()
	first, err := s.Jobs.List(ctx, "alpha", ListOptions{Phase: "Running"})
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	if strings.Contains(first.NextPageToken, "next") {
		t.Errorf("token %q shows Temporal's bytes", first.NextPageToken)
	}
	if _, err := s.Jobs.List(ctx, "alpha", ListOptions{Phase: "Running", PageToken: first.NextPageToken, Limit: 5}); err != nil {
		t.Fatalf("next page: %v", err)
	}
	if got := string(tc.tokens[1]); got != "next" {
		t.Errorf("Temporal got %q for the next page, want its own token back", got)
	}
	altered := []byte(first.NextPageToken)
	altered[len(altered)-2] ^= 1
	for name, o := range map[string]struct {
		ws string
		o  ListOptions
	}{
		"junk":              {"alpha", ListOptions{PageToken: "junk"}},
		"base64 junk":       {"alpha", ListOptions{PageToken: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"altered":           {"alpha", ListOptions{Phase: "Running", PageToken: string(altered)}},
		"another workspace": {"beta", ListOptions{Phase: "Running", PageToken: first.NextPageToken}},
		"other filters":     {"alpha", ListOptions{Phase: "Failed", PageToken: first.NextPageToken}},
		"another kind":      {"alpha", ListOptions{Phase: "Running", PageToken: first.NextPageToken}},
	} {
		n := len(tc.tokens)
		var err error
		if name == "another kind" {
			_, err = s.Experiments.List(ctx, o.ws, o.o)
		} else {
			_, err = s.Jobs.List(ctx, o.ws, o.o)
		}
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) || len(se.Fields) != 1 || se.Fields[0].Field != "pageToken" {
			t.Errorf("%s: %v, want invalid naming pageToken", name, err)
		}
		if len(tc.tokens) != n {
			t.Errorf("%s: reached Temporal", name)
		}
	}
	if CheckPageToken(first.NextPageToken) != "" || CheckPageToken("junk") == "" || CheckPageToken("") == "" {
		t.Error("CheckPageToken: wrong on a sealed token, junk or nothing")
	}

	// Two servers: each with a key of its own, one's token is refused by the other;
	// with the installation's shared key, either opens the other's.
	other := newTest(tc)
	if _, err := other.Jobs.List(ctx, "alpha", ListOptions{Phase: "Running", PageToken: first.NextPageToken}); !errors.Is(err, ErrInvalid) {
		t.Errorf("another server's own key opened the token: %v", err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	shared := func(context.Context) ([]byte, error) { return key, nil }
	s.SetPageKeySource(shared)
	other.SetPageKeySource(shared)
	l, err := s.Jobs.List(ctx, "alpha", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Jobs.List(ctx, "alpha", ListOptions{PageToken: l.NextPageToken}); err != nil {
		t.Errorf("a token of the shared key at another server: %v", err)
	}
	// A key source that fails: the process's own key seals, and opens what it sealed.
	failing := newTest(tc)
	failing.SetPageKeySource(func(context.Context) ([]byte, error) { return nil, errors.New("NATS down") })
	l, err = failing.Jobs.List(ctx, "alpha", ListOptions{})
	if err == nil {
		_, err = failing.Jobs.List(ctx, "alpha", ListOptions{PageToken: l.NextPageToken})
	}
	if err != nil {
		t.Errorf("with the key source down: %v", err)
	}
}
