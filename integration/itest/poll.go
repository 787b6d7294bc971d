package itest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// Eventually polls cond every 100 ms until it holds, failing the test with what when
// ctx ends first.
func Eventually(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Do sends a request with method to url, with token as its bearer token (none when
// empty) and body (none when nil), failing the test when no answer comes. The caller
// closes the answer's body.
func Do(t testing.TB, ctx context.Context, method, url, token string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
