package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"github.com/opendlc/opendlc/schemas"
)

// ErrSecretNotFound means a webhook's secretRef names a secret the SecretSource does not have.
var ErrSecretNotFound = errors.New("notify: secret not found")

// SecretSource resolves the secretRef of a webhook to its HMAC key, each time a request
// is signed, so that a rotated secret is used from the next delivery on.
type SecretSource interface {
	// Secret returns the key ref names in workspace, or an error wrapping
	// ErrSecretNotFound.
	Secret(ctx context.Context, workspace string, ref schemas.SecretRef) ([]byte, error)
}

// StaticSecrets is a SecretSource held in memory, keyed "<workspace>/<name>" or, for a
// ref with a key, "<workspace>/<name>/<key>". It suits tests and single-process setups.
type StaticSecrets map[string][]byte

var _ SecretSource = StaticSecrets(nil)

// Secret looks the key up.
func (s StaticSecrets) Secret(_ context.Context, workspace string, ref schemas.SecretRef) ([]byte, error) {
	k := workspace + "/" + ref.Name
	if ref.Key != "" {
		k += "/" + ref.Key
	}
	v, ok := s[k]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrSecretNotFound, k)
	}
	return v, nil
}

// DirSecrets is a SecretSource that reads files of one directory, each time a secret
// is needed (so a rotated file is used from the next delivery on): a ref's secret in
// a workspace is the file "<workspace>.<name>", or "<workspace>.<name>.<key>" for a ref
// with a key. Workspaces and secret names are DNS labels, which hold no '.', so the
// names cannot collide; the layout is that of a Kubernetes Secret mounted as a volume
// (one file per key). One newline ending the file is not part of the secret (files
// written by echo end with one). Names that could leave the directory are refused,
// and the files are opened through an os.Root, so no symbolic link leads out of it.
type DirSecrets string

var _ SecretSource = DirSecrets("")

// secretKeyRE is what a ref's key may be: a Kubernetes Secret's key.
var secretKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Secret reads the file.
func (d DirSecrets) Secret(_ context.Context, workspace string, ref schemas.SecretRef) ([]byte, error) {
	name := workspace + "." + ref.Name
	if ref.Key != "" {
		name += "." + ref.Key
	}
	if msg := schemas.CheckWorkspaceName(workspace); msg != "" {
		return nil, fmt.Errorf("%w: workspace %q %s", ErrSecretNotFound, workspace, msg)
	}
	if msg := schemas.CheckObjectName(ref.Name); msg != "" {
		return nil, fmt.Errorf("%w: secret %q %s", ErrSecretNotFound, ref.Name, msg)
	}
	if ref.Key != "" && (!secretKeyRE.MatchString(ref.Key) || ref.Key == "." || ref.Key == "..") {
		return nil, fmt.Errorf("%w: key %q: letters, digits, '-', '_' and '.' only", ErrSecretNotFound, ref.Key)
	}
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, fmt.Errorf("notify: the secrets directory: %w", err)
	}
	defer root.Close()
	data, err := root.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no file %s in the secrets directory", ErrSecretNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("notify: secret %s: %w", name, err)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: the file %s is empty", ErrSecretNotFound, name)
	}
	return data, nil
}
