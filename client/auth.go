package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/opendlc/opendlc/api"
)

// WithTLSConfig sets the TLS configuration of https connections (a private CA, a
// client certificate). It replaces the HTTP client's transport. Default: the system's
// roots.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) error {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg
		c.http = &http.Client{Transport: t, Timeout: c.http.Timeout}
		return nil
	}
}

// WithCAFile trusts only the PEM certificates in path for https connections: for a
// server with a self-signed or private-CA certificate. Default: the system's roots.
func WithCAFile(path string) Option {
	return func(c *Client) error {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("client: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("client: CA file %s holds no PEM certificate", path)
		}
		return WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})(c)
	}
}

// IsUnauthenticated reports whether err is the server's 401: no token, or a malformed,
// unknown, revoked or expired one.
func IsUnauthenticated(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// IsPermissionDenied reports whether err is the server's 403.
func IsPermissionDenied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden
}

// Whoami returns the identity of the client's token.
func (c *Client) Whoami(ctx context.Context) (*api.Identity, error) {
	return call[api.Identity](ctx, c, http.MethodGet, "/v1/whoami", nil, nil)
}

// CreateToken creates a token (an admin, or a workspace admin in its workspace). The answer holds the secret, which the
// server does not keep: it cannot be shown again.
func (c *Client) CreateToken(ctx context.Context, req api.TokenRequest) (*api.CreatedToken, error) {
	return callJSON[api.CreatedToken](ctx, c, http.MethodPost, "/v1/tokens", req)
}

// ListTokens lists tokens (an admin; a workspace admin its workspace's), without secrets; workspace "" for all.
func (c *Client) ListTokens(ctx context.Context, workspace string) (*api.TokenList, error) {
	q := url.Values{}
	if workspace != "" {
		q.Set("workspace", workspace)
	}
	return call[api.TokenList](ctx, c, http.MethodGet, "/v1/tokens", q, nil)
}

// RevokeToken deletes a token (an admin; a workspace admin its workspace's); it stops working at once.
func (c *Client) RevokeToken(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(name), nil, nil, nil)
}

// CreateWorkspace registers a workspace (admin only).
func (c *Client) CreateWorkspace(ctx context.Context, ws api.Workspace) (*api.Workspace, error) {
	return callJSON[api.Workspace](ctx, c, http.MethodPost, "/v1/workspaces", ws)
}

// ListWorkspaces lists the workspaces the token may see: all for an admin, its own
// otherwise.
func (c *Client) ListWorkspaces(ctx context.Context) (*api.WorkspaceList, error) {
	return call[api.WorkspaceList](ctx, c, http.MethodGet, "/v1/workspaces", nil, nil)
}

// GetWorkspace returns a workspace of the registry.
func (c *Client) GetWorkspace(ctx context.Context, name string) (*api.Workspace, error) {
	return call[api.Workspace](ctx, c, http.MethodGet, workspacePath(name), nil, nil)
}

// DeleteWorkspace deletes a workspace (admin) and revokes its tokens. A workspace that
// still holds jobs, experiments, pipelines or schedules is refused: an *APIError with
// status 409.
func (c *Client) DeleteWorkspace(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, workspacePath(name), nil, nil, nil)
}
