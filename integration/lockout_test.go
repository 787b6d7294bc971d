package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/opendlc/opendlc/api"
)

// lockoutAddr is the loopback address the lockout test's calls come from, so that
// other tests keep their own limits.
const lockoutAddr = "127.0.0.3"

// Issue 33, finding 9: a valid token was locked out by bad guesses from the same
// address. On the real API, a token in use from an address keeps working while someone
// else's bad guesses from that address are answered 429; a valid token the server has
// not seen yet waits like the guesses.
func TestLockoutSparesATokenInUse(t *testing.T) {
	ctx := testContext(t)
	ws := workspace(t)
	ensureWorkspace(t, ctx, ws)
	token := func(name string) string {
		tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: name, Workspace: ws, Role: api.RoleViewer})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), name) })
		return tok.Secret
	}
	inUse, unseen := token("lockout-in-use"), token("lockout-unseen")
	hc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(lockoutAddr)}}).DialContext}}
	whoami := func(tok string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.e.APIURL+"/v1/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := whoami(inUse); code != http.StatusOK {
		t.Fatalf("the token in use: %d", code)
	}
	got := map[int]int{}
	for i := range 40 {
		got[whoami("dlc_"+fmt.Sprintf("%064d", i))]++
	}
	if got[http.StatusTooManyRequests] == 0 {
		t.Fatalf("40 bad guesses: %v, want the address locked out", got)
	}
	for i := range 5 {
		if code := whoami(inUse); code != http.StatusOK {
			t.Fatalf("the token in use after the guesses, call %d: %d, want 200", i, code)
		}
	}
	if code := whoami(unseen); code != http.StatusTooManyRequests {
		t.Errorf("a valid token never used, from the locked-out address: %d, want 429", code)
	}
}
