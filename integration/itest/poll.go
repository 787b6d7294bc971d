package itest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// Left is the time left before ctx's deadline, or DefaultWait when it has none: the
// timeout of a wait (testutil.Eventually) that ctx bounds.
func Left(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), 0)
	}
	return DefaultWait
}

// DefaultWait bounds a wait whose context has no deadline (Left).
const DefaultWait = 10 * time.Minute

// PollInterval is how often the integration tests poll the stack's API.
const PollInterval = 100 * time.Millisecond

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
