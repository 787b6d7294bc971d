package auth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenFile is the file name, in a state directory, of the admin token `dlc up`
// generates; the CLI reads it from the default state directory when no token is given.
const AdminTokenFile = "admin-token"

// BootstrapFile installs the admin token kept in path, generating one into path (mode
// 0600) when the file does not exist yet, and returns it. The token is never logged.
func BootstrapFile(ctx context.Context, s *Store, path string) (string, error) {
	token, err := ReadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if token, _, err = NewToken(); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", fmt.Errorf("auth: admin token: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("auth: write admin token: %w", err)
		}
		_, werr := f.WriteString(token + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("auth: write admin token: %w", werr)
		}
	} else if err != nil {
		return "", err
	}
	if err := s.Bootstrap(ctx, token); err != nil {
		return "", err
	}
	return token, nil
}

// ReadTokenFile reads a token from a file (surrounding white space ignored) and checks
// its form. Errors wrap fs.ErrNotExist when there is no file.
func ReadTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(data))
	if _, err := ParseToken(token); err != nil {
		return "", fmt.Errorf("auth: %s does not hold an OpenDLC token: %w", path, err)
	}
	return token, nil
}
