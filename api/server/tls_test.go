package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/api/server"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testcert"
	"github.com/opendlc/opendlc/service"
)

// The API over HTTPS with a self-signed certificate, a real token store on NATS, and
// the SDK: a client that trusts the certificate works, one that does not is refused,
// and tokens and workspaces go through their whole life.
func TestHTTPSWithTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ev, err := jetstream.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := ev.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(ctx, ev.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	admin, err := auth.BootstrapFile(ctx, store, filepath.Join(dir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}

	certFile, keyFile := testcert.Write(t, dir, "127.0.0.1", "localhost")
	tlsConfig, err := server.LoadTLS(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := server.New(service.Compose(ctx, service.Config{Events: ev, Auth: store}), ev, server.WithAuth(store), server.WithLogger(logger)).HTTPServer(tlsConfig)
	if srv.ReadHeaderTimeout == 0 || srv.IdleTimeout == 0 || srv.MaxHeaderBytes == 0 || srv.WriteTimeout != 0 {
		t.Errorf("server limits: header %v, idle %v, max header %d, write %v", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.WriteTimeout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- server.Serve(serveCtx, srv, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := "https://" + ln.Addr().String()

	c, err := client.New(url, client.WithToken(admin), client.WithCAFile(certFile))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Whoami(ctx)
	if err != nil || id.Role != api.RoleAdmin || id.Workspace != api.AllWorkspaces {
		t.Fatalf("whoami over https: %+v, %v", id, err)
	}

	untrusting, err := client.New(url, client.WithToken(admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.Whoami(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v, want a certificate error", err)
	}
	plain, err := client.New("http://"+ln.Addr().String(), client.WithToken(admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Whoami(ctx); err == nil {
		t.Errorf("plain http to the https port worked")
	}

	// Tokens and workspaces through the SDK.
	if _, err := c.CreateWorkspace(ctx, api.Workspace{Name: "vision", Namespace: "team-vision"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWorkspace(ctx, api.Workspace{Name: "nlp"}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, api.TokenRequest{Name: "vision-ci", Workspace: "vision", Role: api.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	member, err := client.New(url, client.WithToken(tok.Secret), client.WithCAFile(certFile))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := member.Whoami(ctx); err != nil || id.Name != "vision-ci" || id.Workspace != "vision" || id.Role != api.RoleMember {
		t.Errorf("member whoami: %+v, %v", id, err)
	}
	l, err := member.ListWorkspaces(ctx)
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "vision" || l.Items[0].Namespace != "team-vision" {
		t.Errorf("a member's workspaces: %+v, %v", l, err)
	}
	if l, err := c.ListWorkspaces(ctx); err != nil || len(l.Items) != 3 {
		t.Errorf("the admin's workspaces (default, nlp, vision): %+v, %v", l, err)
	}
	if _, err := member.GetWorkspace(ctx, "nlp"); !client.IsNotFound(err) {
		t.Errorf("a member reading another workspace: %v, want 404", err)
	}
	if _, err := member.CreateToken(ctx, api.TokenRequest{Name: "x", Workspace: "vision", Role: api.RoleViewer}); !client.IsPermissionDenied(err) {
		t.Errorf("a member creating a token: %v, want 403", err)
	}
	if _, err := member.ListTokens(ctx, ""); !client.IsPermissionDenied(err) {
		t.Errorf("a member listing tokens: %v, want 403", err)
	}
	_, err = c.CreateToken(ctx, api.TokenRequest{Name: "vision-ci", Workspace: "vision", Role: api.RoleViewer})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("a second token vision-ci: %v, want 409", err)
	}
	_, err = c.CreateToken(ctx, api.TokenRequest{Name: "Bad", Workspace: "nowhere", Role: "owner"})
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || len(apiErr.API.Details) != 3 {
		t.Errorf("an invalid token request: %v, want 422 with 3 field errors", err)
	}
	toks, err := c.ListTokens(ctx, "vision")
	if err != nil || len(toks.Items) != 1 || toks.Items[0].Name != "vision-ci" {
		t.Errorf("tokens of vision: %+v, %v", toks, err)
	}
	if err := c.RevokeToken(ctx, "vision-ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := member.Whoami(ctx); !client.IsUnauthenticated(err) {
		t.Errorf("a revoked token: %v, want 401", err)
	}
}
