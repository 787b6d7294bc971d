package images

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// The image is pushed with crane, a real registry client (run from its Go module at the
// version in go.mod, as docs/production.md says), from the OCI layout and from the
// tarball, to a registry (go-containerregistry's, over HTTP on loopback); what the
// registry then serves carries the labels.
func TestDLCImagePushedWithCrane(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	layoutDir := filepath.Join(t.TempDir(), "oci")
	d, err := BuildDLC(ctx, DLCOptions{LayoutDir: layoutDir})
	if err != nil {
		t.Fatal(err)
	}
	root, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/google/go-containerregistry").Output()
	if err != nil {
		t.Fatal(err)
	}
	crane := "github.com/google/go-containerregistry/cmd/crane@" + strings.TrimSpace(string(version))
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", append([]string{"run", crane}, args...)...)
		cmd.Dir = root
		// Outside the module: `go run pkg@version` needs no go.mod entry of crane's own
		// dependencies.
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("crane %s: %v %s", strings.Join(args, " "), err, stderrOf(err))
		}
		return string(out)
	}
	for src, ref := range map[string]string{
		layoutDir: host + "/opendlc/dlc:" + d.Version,
		d.Tarball: host + "/opendlc/dlc:from-tarball",
	} {
		run("push", "--insecure", src, ref)
		var cfg struct {
			Config struct{ Labels map[string]string }
		}
		if err := json.Unmarshal([]byte(run("config", "--insecure", ref)), &cfg); err != nil {
			t.Fatal(err)
		}
		for k, v := range d.Labels {
			if cfg.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", ref, k, cfg.Config.Labels[k], v)
			}
		}
		t.Logf("pushed %s to %s: labels %v", filepath.Base(src), ref, cfg.Config.Labels)
	}
}

func stderrOf(err error) string {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(ee.Stderr)
	}
	return ""
}
