package local

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/opendlc/opendlc/schemas"
)

// WorkspaceEnvFunc returns the variables of a workspace's replicas: its S3 credentials,
// say (storage.Accounts). An error fails the Launch as retryable.
type WorkspaceEnvFunc func(ctx context.Context, workspace string) ([]schemas.EnvVar, error)

// WithWorkspaceEnv gives every replica the variables f returns for its gang's
// workspace, after WithEnv's (they win over them) and before the job's own. With it,
// the worker's own AWS credential variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE) are not
// passed on, so a replica holds no credentials but its workspace's. Default: none.
func WithWorkspaceEnv(f WorkspaceEnvFunc) Option {
	return func(b *Backend) error {
		b.wsEnv = f
		return nil
	}
}

// workerCredentialVars are the worker's variables a replica does not inherit when its
// workspace gives it credentials.
var workerCredentialVars = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"}

// workspaceEnv asks WithWorkspaceEnv's function for a workspace's variables.
func (b *Backend) workspaceEnv(ctx context.Context, workspace string) ([]schemas.EnvVar, error) {
	if b.wsEnv == nil {
		return nil, nil
	}
	env, err := b.wsEnv(ctx, workspace)
	if err != nil {
		return nil, fmt.Errorf("local: environment of workspace %s: %w", workspace, err)
	}
	return env, nil
}

// inherited is the worker's environment that replicas start from: all of it, less
// workerCredentialVars when WithWorkspaceEnv is set.
func (b *Backend) inherited() []string {
	env := os.Environ()
	if b.wsEnv == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, v := range workerCredentialVars {
			drop = drop || name == v
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
