package embedded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// DefaultStorageRoot is where the workspaces' default S3 locations are with
// Config.StorageIsolation: s3://dlc/workspaces/<workspace>/.
const DefaultStorageRoot = "s3://" + DefaultBucket + "/workspaces"

// S3AccountsKeyFile is the file, in the state directory, holding the key the
// workspaces' S3 secrets are derived from (storage.Accounts.Key); generated, mode 0600,
// on first start.
const S3AccountsKeyFile = "s3-accounts-key"

// startStorage prepares per-workspace S3 accounts (Config.StorageIsolation): the key,
// and the Accounts on the stack's gateway, whose registry is the API's token store.
func (e *Embedded) startStorage(cfg Config) error {
	key, err := readOrCreateKey(filepath.Join(cfg.Dir, S3AccountsKeyFile))
	if err != nil {
		return err
	}
	s := e.Stack.S3
	e.storageRoot = cfg.StorageRoot
	if e.storageRoot == "" {
		e.storageRoot = DefaultStorageRoot
	}
	if _, err := storage.ParseLocation(e.storageRoot); err != nil {
		return fmt.Errorf("embedded: storage root: %w", err)
	}
	e.accounts = &storage.Accounts{
		Gateway: storage.Gateway{Endpoint: s.Endpoint, Region: s.Region,
			Root: storage.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}},
		Key:    key,
		Policy: &storage.Policy{Root: e.storageRoot, Workspaces: registry{e}},
	}
	return nil
}

// registry reads the workspace registry through the running process's token store.
type registry struct{ e *Embedded }

func (r registry) Workspace(ctx context.Context, name string) (api.Workspace, bool, error) {
	if r.e.Process == nil || r.e.Process.Auth == nil {
		return api.Workspace{}, false, errors.New("embedded: the workspace registry is not open yet")
	}
	return r.e.Process.Auth.Workspace(ctx, name)
}

// WorkspaceS3Env is the S3 credentials of a workspace's replicas on the local backend
// (local.WithWorkspaceEnv): its own gateway account.
func (e *Embedded) WorkspaceS3Env(ctx context.Context, workspace string) ([]schemas.EnvVar, error) {
	c, err := e.accounts.Credentials(ctx, workspace)
	if err != nil {
		return nil, err
	}
	return []schemas.EnvVar{
		{Name: "AWS_ACCESS_KEY_ID", Value: c.AccessKeyID},
		{Name: "AWS_SECRET_ACCESS_KEY", Value: c.SecretAccessKey},
	}, nil
}

// workspaceS3Credentials is S3CredentialsFor with Config.StorageIsolation.
func (e *Embedded) workspaceS3Credentials(ctx context.Context, workspace string) (kube.S3Credentials, error) {
	c, err := e.accounts.Credentials(ctx, workspace)
	if err != nil {
		return kube.S3Credentials{}, err
	}
	return kube.S3Credentials{Endpoint: e.PodS3Endpoint, Region: e.Stack.S3.Region,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey}, nil
}

// readOrCreateKey reads a hex key from path, generating 32 random bytes there (mode
// 0600) when the file does not exist.
func readOrCreateKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("embedded: S3 accounts key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return readOrCreateKey(path)
		}
		if err != nil {
			return nil, fmt.Errorf("embedded: S3 accounts key: %w", err)
		}
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("embedded: S3 accounts key: %w", werr)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: S3 accounts key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("embedded: %s does not hold a key of at least 32 hex-encoded bytes", path)
	}
	return key, nil
}
