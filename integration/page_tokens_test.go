package integration

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// Issue 33, finding 9, on the real stack: a junk pageToken went to Temporal as it was
// and the list hung 10 s before a 503. Page tokens are now sealed by the API: a
// listing pages through every job with them, and a made-up token, a well-formed one
// with a wrong MAC, and another workspace's token are each answered 400 naming
// pageToken at once, before anything reaches Temporal.
func TestPageTokensCheckedOnRealStack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	other := ws[:len(ws)-2] + "-b"
	ensureWorkspace(t, ctx, other)
	names := []string{"p1", "p2", "p3"}
	for _, n := range names {
		submit(t, ctx, itest.ShellJob(ws, n, "true"))
		submit(t, ctx, itest.ShellJob(other, n, "true"))
	}
	testutil.Eventually(t, itest.Left(ctx), "three jobs listed", func() bool {
		l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
		return err == nil && len(l.Items) == 3
	}, itest.PollInterval)
	var seen []string
	var tokens []string
	for token := ""; ; {
		page, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{Limit: 1, PageToken: token})
		if err != nil {
			t.Fatalf("page %d: %v", len(tokens), err)
		}
		for _, j := range page.Items {
			seen = append(seen, j.Name)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
		tokens = append(tokens, token)
		if len(tokens) > 10 {
			t.Fatal("more than 10 pages of one job each")
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, names) {
		t.Errorf("paged through %v, want %v", seen, names)
	}
	if len(tokens) == 0 {
		t.Fatal("no page token: the test does not exercise paging")
	}
	// Another first character: it carries six bits of the token's first byte. (The
	// last one's low bits can be padding that decoding ignores: altering them left the
	// token as it was, and the test failed now and then.)
	altered := []byte(tokens[0])
	if altered[0] == 'A' {
		altered[0] = 'B'
	} else {
		altered[0] = 'A'
	}
	for name, c := range map[string]struct{ ws, token string }{
		"junk":              {ws, "junk"},
		"bytes of JSON":     {ws, "eyJMYXN0UnVuSUQiOiJ4In0"},
		"well-formed":       {ws, "AQAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		"altered":           {ws, string(altered)},
		"another workspace": {other, tokens[0]},
	} {
		start := time.Now()
		_, err := env.api.ListJobs(ctx, c.ws, dlc.ListOptions{Limit: 1, PageToken: c.token})
		took := time.Since(start)
		var e *dlc.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || len(e.API.Details) != 1 || e.API.Details[0].Field != "pageToken" {
			t.Errorf("%s: %v, want 400 naming pageToken", name, err)
		}
		if took > 2*time.Second {
			t.Errorf("%s: answered in %v, want at once", name, took)
		}
	}
}
