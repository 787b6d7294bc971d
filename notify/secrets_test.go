package notify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// DirSecrets reads <workspace>.<name>[.<key>] from its directory, without the file's
// last newline, and refuses names that could leave it.
func TestDirSecrets(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	for name, v := range map[string]string{
		"ml.hook":          "0123456789abcdef\n",
		"ml.smtp.password": "hunter2-hunter2\r\n",
		"ml.empty":         "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "ml.away"), []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "ml.away"), filepath.Join(dir, "ml.link")); err != nil {
		t.Fatal(err)
	}
	src := DirSecrets(dir)
	ctx := context.Background()
	for _, tc := range []struct {
		ws   string
		ref  schemas.SecretRef
		want string
	}{
		{"ml", schemas.SecretRef{Name: "hook"}, "0123456789abcdef"},
		{"ml", schemas.SecretRef{Name: "smtp", Key: "password"}, "hunter2-hunter2"},
	} {
		got, err := src.Secret(ctx, tc.ws, tc.ref)
		if err != nil || string(got) != tc.want {
			t.Errorf("Secret(%s, %+v) = %q, %v; want %q", tc.ws, tc.ref, got, err, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		ws  string
		ref schemas.SecretRef
	}{
		"missing":                     {"ml", schemas.SecretRef{Name: "nope"}},
		"another workspace's":         {"cv", schemas.SecretRef{Name: "hook"}},
		"empty":                       {"ml", schemas.SecretRef{Name: "empty"}},
		"a key with a slash":          {"ml", schemas.SecretRef{Name: "smtp", Key: "../../etc/passwd"}},
		"a key of dots":               {"ml", schemas.SecretRef{Name: "smtp", Key: ".."}},
		"a workspace with a dot":      {"ml.smtp", schemas.SecretRef{Name: "password"}},
		"a link out of the directory": {"ml", schemas.SecretRef{Name: "link"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := src.Secret(ctx, tc.ws, tc.ref)
			if err == nil {
				t.Fatalf("Secret(%s, %+v) = %q, want an error", tc.ws, tc.ref, got)
			}
			if name != "a link out of the directory" && !errors.Is(err, ErrSecretNotFound) {
				t.Errorf("error %v, want ErrSecretNotFound", err)
			}
		})
	}
}
