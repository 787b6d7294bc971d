package notify

import (
	"context"
	"errors"
	"fmt"

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
