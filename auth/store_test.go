package auth_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newStore starts an embedded NATS server and opens a store on it.
func newStore(t *testing.T, opts ...auth.Option) *auth.Store {
	t.Helper()
	n := startNATS(t)
	return openStore(t, n.URL, opts...)
}

func startNATS(t *testing.T) *devstack.NATS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// openStore opens a store on its own connection to the NATS server at url.
func openStore(t *testing.T, url string, opts ...auth.Option) *auth.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := jetstream.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := auth.OpenStore(ctx, c.JetStream(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// withVision creates workspace vision in s; the context it answers ends after 30
// seconds or with the test.
func withVision(t *testing.T, s *auth.Store) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := s.CreateWorkspace(ctx, api.Workspace{Name: "vision"}, "admin"); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// visionToken creates token name with role in workspace vision, as admin.
func visionToken(ctx context.Context, t *testing.T, s *auth.Store, name string, role api.Role) api.CreatedToken {
	t.Helper()
	tok, err := s.CreateToken(ctx, api.TokenRequest{Name: name, Workspace: "vision", Role: role}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func fieldsOf(err error) []string {
	var list schemas.ErrorList
	if !errors.As(err, &list) {
		return nil
	}
	var out []string
	for _, fe := range list {
		out = append(out, fe.Field)
	}
	return out
}

func TestTokenLifecycle(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	s := newStore(t, auth.WithClock(clk.now))
	ctx := context.Background()

	// A token needs its workspace to exist.
	_, err := s.CreateToken(ctx, api.TokenRequest{Name: "ci", Workspace: "vision", Role: api.RoleMember}, "admin")
	if diff := cmp.Diff([]string{"workspace"}, fieldsOf(err)); diff != "" {
		t.Fatalf("token in a missing workspace: %v (-want +got fields):\n%s", err, diff)
	}
	ws, err := s.CreateWorkspace(ctx, api.Workspace{Name: "vision"}, "admin")
	if err != nil || ws.Namespace != "vision" || ws.CreatedBy != "admin" {
		t.Fatalf("create workspace: %+v, %v", ws, err)
	}
	if _, err := s.CreateWorkspace(ctx, api.Workspace{Name: "vision"}, "admin"); !errors.Is(err, auth.ErrExists) {
		t.Errorf("second workspace vision: %v, want ErrExists", err)
	}

	created, err := s.CreateToken(ctx, api.TokenRequest{Name: "ci", Workspace: "vision", Role: api.RoleMember, TTL: schemas.Duration(time.Hour)}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	wantExpiry := clk.now().Add(time.Hour)
	if created.ExpiresAt == nil || !created.ExpiresAt.Equal(wantExpiry) || created.CreatedBy != "admin" {
		t.Errorf("created token %+v", created.Token)
	}
	id, err := s.Authenticate(ctx, created.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(api.Identity{Name: "ci", Workspace: "vision", Role: api.RoleMember, ExpiresAt: &wantExpiry}, id); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	if _, err := s.CreateToken(ctx, api.TokenRequest{Name: "ci", Workspace: "vision", Role: api.RoleViewer}, "admin"); !errors.Is(err, auth.ErrExists) {
		t.Errorf("second token ci: %v, want ErrExists", err)
	}

	// The same id with another secret is not the token.
	other, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	forged := created.Secret[:21] + other[21:]
	if _, err := s.Authenticate(ctx, forged); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("forged secret: %v, want ErrUnknownToken", err)
	}
	if _, err := s.Authenticate(ctx, other); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("unknown token: %v", err)
	}
	if _, err := s.Authenticate(ctx, "dlc_garbage"); !errors.Is(err, auth.ErrMalformedToken) {
		t.Errorf("malformed token: %v", err)
	}

	toks, err := s.ListTokens(ctx, "")
	if err != nil || len(toks) != 1 || toks[0].Name != "ci" {
		t.Errorf("list: %+v, %v", toks, err)
	}
	if toks, err := s.ListTokens(ctx, "other"); err != nil || len(toks) != 0 {
		t.Errorf("list of another workspace: %+v, %v", toks, err)
	}

	clk.add(time.Hour)
	if _, err := s.Authenticate(ctx, created.Secret); !errors.Is(err, auth.ErrExpiredToken) {
		t.Errorf("after its TTL: %v, want ErrExpiredToken", err)
	}

	if err := s.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, created.Secret); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("revoked token: %v, want ErrUnknownToken", err)
	}
	if err := s.RevokeToken(ctx, "ci"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("second revoke: %v, want ErrNotFound", err)
	}
	// The name is free again.
	if _, err := s.CreateToken(ctx, api.TokenRequest{Name: "ci", Workspace: "vision", Role: api.RoleViewer}, "admin"); err != nil {
		t.Errorf("re-create ci: %v", err)
	}
}

func TestValidateTokenRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	past, far := now.Add(-time.Minute), now.Add(400*24*time.Hour)
	tests := map[string]struct {
		req  api.TokenRequest
		want []string
	}{
		"valid member":       {req: api.TokenRequest{Name: "ci", Workspace: "vision", Role: api.RoleMember}},
		"valid admin":        {req: api.TokenRequest{Name: "ops", Workspace: "*", Role: api.RoleAdmin}},
		"empty":              {req: api.TokenRequest{}, want: []string{"name", "role", "workspace"}},
		"admin in one ws":    {req: api.TokenRequest{Name: "a", Workspace: "vision", Role: api.RoleAdmin}, want: []string{"workspace"}},
		"viewer everywhere":  {req: api.TokenRequest{Name: "a", Workspace: "*", Role: api.RoleViewer}, want: []string{"workspace"}},
		"bad names":          {req: api.TokenRequest{Name: "Bad_Name", Workspace: "a.b", Role: "owner"}, want: []string{"name", "role", "workspace"}},
		"expired already":    {req: api.TokenRequest{Name: "a", Workspace: "v", Role: api.RoleViewer, ExpiresAt: &past}, want: []string{"expiresAt"}},
		"too far":            {req: api.TokenRequest{Name: "a", Workspace: "v", Role: api.RoleViewer, ExpiresAt: &far}, want: []string{"expiresAt"}},
		"ttl too long":       {req: api.TokenRequest{Name: "a", Workspace: "v", Role: api.RoleViewer, TTL: schemas.Duration(auth.MaxTTL + 1)}, want: []string{"ttl"}},
		"ttl too short":      {req: api.TokenRequest{Name: "a", Workspace: "v", Role: api.RoleViewer, TTL: schemas.Duration(time.Millisecond)}, want: []string{"ttl"}},
		"workspace too long": {req: api.TokenRequest{Name: "a", Workspace: "w1234567890123456789012345678901234567890", Role: api.RoleViewer}, want: []string{"workspace"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fieldsOf(auth.ValidateTokenRequest(tt.req, now).Err())); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateWorkspace(t *testing.T) {
	tests := map[string]struct {
		ws   api.Workspace
		want []string
	}{
		"valid":         {ws: api.Workspace{Name: "vision", Namespace: "team-vision"}},
		"reserved":      {ws: api.Workspace{Name: auth.ReservedWorkspace}, want: []string{"name"}},
		"everything":    {ws: api.Workspace{Name: "-x", Namespace: "A", Description: string(make([]byte, 300))}, want: []string{"description", "name", "namespace"}},
		"name required": {ws: api.Workspace{}, want: []string{"name"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fieldsOf(auth.ValidateWorkspace(tt.ws).Err())); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// BootstrapFile generates the admin token once (mode 0600), reuses it on the next
// start, and a new file replaces the old bootstrap token.
func TestBootstrapFile(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", auth.AdminTokenFile)
	tok, err := auth.BootstrapFile(ctx, s, path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, %v", fi, err)
	}
	id, err := s.Authenticate(ctx, tok)
	if err != nil || id.Role != api.RoleAdmin || id.Workspace != api.AllWorkspaces || id.ExpiresAt != nil || id.Name != auth.BootstrapName {
		t.Fatalf("admin identity %+v, %v", id, err)
	}
	if _, err := s.GetWorkspace(ctx, schemas.DefaultWorkspace); err != nil {
		t.Errorf("default workspace: %v", err)
	}
	again, err := auth.BootstrapFile(ctx, s, path)
	if err != nil || again != tok {
		t.Fatalf("second start: %v; same token %v", err, again == tok)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	replaced, err := auth.BootstrapFile(ctx, s, path)
	if err != nil || replaced == tok {
		t.Fatalf("new admin token: %v", err)
	}
	if _, err := s.Authenticate(ctx, tok); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("the replaced admin token still works: %v", err)
	}
	if _, err := s.Authenticate(ctx, replaced); err != nil {
		t.Errorf("the new admin token: %v", err)
	}

	if err := os.WriteFile(path, []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.BootstrapFile(ctx, s, path); !errors.Is(err, auth.ErrMalformedToken) {
		t.Errorf("a file without a token: %v", err)
	}
}

// Two API servers share the bucket: a token made on one works on the other at once
// (read through), and a revocation on one reaches the other within moments.
func TestRevocationReachesEveryServer(t *testing.T) {
	n := startNATS(t)
	one, two := openStore(t, n.URL), openStore(t, n.URL)
	ctx := withVision(t, one)
	tok := visionToken(ctx, t, one, "ci", api.RoleViewer)
	if _, err := two.Authenticate(ctx, tok.Secret); err != nil {
		t.Fatalf("a new token on the other server: %v", err)
	}
	if err := one.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Authenticate(ctx, tok.Secret); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("revoked, on the server that revoked it: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, "the other server to refuse the revoked token", func() error {
		if _, err := two.Authenticate(ctx, tok.Secret); !errors.Is(err, auth.ErrUnknownToken) {
			return fmt.Errorf("it answers %w", err)
		}
		return nil
	}, 10*time.Millisecond)
}

// While NATS is down, tokens the server knows keep working and revoked ones stay
// refused; a token it has never seen cannot be checked (an error, not a refusal).
func TestAuthenticateWhileNATSIsDown(t *testing.T) {
	n := startNATS(t)
	s := openStore(t, n.URL)
	ctx := withVision(t, s)
	kept, revoked := visionToken(ctx, t, s, "kept", api.RoleMember), visionToken(ctx, t, s, "revoked", api.RoleMember)
	if err := s.RevokeToken(ctx, "revoked"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if id, err := s.Authenticate(short, kept.Secret); err != nil || id.Name != "kept" {
		t.Errorf("a known token with NATS down: %+v, %v", id, err)
	}
	if _, err := s.Authenticate(short, revoked.Secret); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("a revoked token with NATS down: %v", err)
	}
	unknown, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(short, unknown); err == nil || errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("an unseen token with NATS down: %v, want an error other than ErrUnknownToken", err)
	}
}

// A deleted workspace is gone and its name can be registered again; deleting one that
// does not exist is ErrNotFound.
func TestDeleteWorkspace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateWorkspace(ctx, api.Workspace{Name: "old"}, "admin"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWorkspace(ctx, "old"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.GetWorkspace(ctx, "old"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteWorkspace(ctx, "old"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.CreateWorkspace(ctx, api.Workspace{Name: "old"}, "admin"); err != nil {
		t.Errorf("create again after delete: %v", err)
	}
}
