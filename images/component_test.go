package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/opendlc/opendlc/internal/tools"
)

// The NATS server's image: one layer holding the static nats-server of the version
// go.mod has (the tools table's), as the entrypoint run by the non-root user, tagged
// with that version and labelled with its source, version and revision; a second build
// reads the cache.
func TestComponentImageOfNATSServer(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tool, ok := tools.Lookup("nats-server")
	if !ok {
		t.Fatal("no nats-server in the tools table")
	}
	// The image's server is the one the devstack embeds: go.mod's version.
	root, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 (\S+)`).FindSubmatch(gomod); m == nil || string(m[1]) != tool.Version {
		t.Errorf("go.mod requires nats-server %q, the tools table has %s", m, tool.Version)
	}

	start := time.Now()
	c, err := Component(ctx, "nats-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %s", c.Ref, time.Since(start).Round(100*time.Millisecond))
	if want := Domain + "/nats-server:" + tool.Version; c.Ref != want || c.Version != tool.Version {
		t.Errorf("reference %q version %q, want %q", c.Ref, c.Version, want)
	}
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(c.Tarball) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{c.Ref}) {
		t.Fatalf("tarball manifest %+v, want one image tagged %s", manifest, c.Ref)
	}

	img, err := loadTarball(c.Image)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		LabelTitle: "nats-server", LabelSource: "https://github.com/nats-io/nats-server",
		LabelVersion: tool.Version, LabelRevision: tool.Version,
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/nats-server"}) || c.Entrypoint != "/usr/local/bin/nats-server" {
		t.Errorf("entrypoint %q (%q), want [/usr/local/bin/nats-server]", cf.Config.Entrypoint, c.Entrypoint)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want the non-root 65532:65532", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%d layers, want 1", len(layers))
	}

	// The binary in the layer: nats-server of the pinned version, static.
	bin := extract(t, img, "usr/local/bin/nats-server")
	path := filepath.Join(t.TempDir(), "nats-server")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Main.Path != "github.com/nats-io/nats-server/v2" || info.Main.Version != tool.Version {
		t.Errorf("binary of %s %s, want github.com/nats-io/nats-server/v2 %s", info.Main.Path, info.Main.Version, tool.Version)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["GOOS"] != "linux" || settings["GOARCH"] != "amd64" {
		t.Errorf("binary built with CGO_ENABLED=%q GOOS=%q GOARCH=%q, want a static linux/amd64 build",
			settings["CGO_ENABLED"], settings["GOOS"], settings["GOARCH"])
	}
	if bytes.Contains(bin, []byte("/lib64/ld-linux")) {
		t.Error("the binary names the dynamic loader: not static")
	}

	// Cached: a second build reads the same tarball back, without writing it.
	fi, err := os.Stat(c.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	again, err := Component(ctx, "nats-server")
	if err != nil {
		t.Fatal(err)
	}
	if again.Ref != c.Ref || again.Tarball != c.Tarball {
		t.Errorf("second build %+v, want the cached %+v", again.Image, c.Image)
	}
	if fi2, err := os.Stat(c.Tarball); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("the tarball was written again (%v)", err)
	}
	t.Logf("cached build in %s", time.Since(start).Round(time.Millisecond))

	if _, err := Component(ctx, "etcd"); err == nil || !strings.Contains(err.Error(), "no component image") {
		t.Errorf("Component(etcd): %v, want no component image", err)
	}
}

// extract returns the content of the file at path (relative, as in the tar) in img's
// flattened file system.
func extract(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", path, err)
		}
		if strings.TrimPrefix(h.Name, "/") == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}
