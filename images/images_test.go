package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// filesOf lists the paths (and hard links' targets) in an image's flattened file system.
func filesOf(t *testing.T, img Image) map[string]string {
	t.Helper()
	v1img, err := loadTarball(img)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(v1img)
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimPrefix(h.Name, "/")] = h.Linkname
	}
}

// The busybox image holds the machine's static busybox with its applets linked to it; a
// second build with the same input reads the cache (the tarball is not written again),
// and the reference carries the input's hash under the images' domain.
func TestBusyboxImageIsCachedByItsInput(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := Busybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.Ref, Domain+"/busybox:") || len(strings.TrimPrefix(img.Ref, Domain+"/busybox:")) != 12 {
		t.Errorf("reference %q, want %s/busybox:<12 hex>", img.Ref, Domain)
	}
	files := filesOf(t, img)
	if _, ok := files["/bin/busybox"]; !ok {
		t.Fatalf("no /bin/busybox in %v", files)
	}
	if files["/bin/sh"] != "bin/busybox" {
		t.Errorf("/bin/sh links to %q, want bin/busybox", files["/bin/sh"])
	}
	before, err := os.Stat(img.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Busybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	if again != img || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("second build %+v (written %v), first %+v (written %v): want the cached one", again, after.ModTime(), img, before.ModTime())
	}
	// A build of other inputs replaces the old one in the cache.
	stale := filepath.Join(Dir(), "busybox-0123456789abcdef")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := cached(ctx, "busybox", hashOf("other input"), func(string) ([]tagged, error) {
		v1img, err := loadTarball(img)
		return []tagged{{ref: ref("busybox", hashOf("other input")), img: v1img}}, err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale build %s is still cached (%v)", stale, err)
	}
	if _, err := os.Stat(img.Tarball); !os.IsNotExist(err) {
		t.Errorf("the earlier build %s is still cached (%v)", img.Tarball, err)
	}
}

// OpenDLC's own image: the dlc binary as the entrypoint, run as the non-root user
// 65532 with its home, written as a docker-archive tarball and an OCI image layout.
func TestDLCImageRunsDlcAsNonRoot(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	layoutDir := filepath.Join(t.TempDir(), "oci")
	img, err := DLC(ctx, layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	v1img, err := loadTarball(img)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := v1img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/dlc" {
		t.Errorf("config user %q entrypoint %v, want 65532:65532 and /usr/local/bin/dlc", cf.Config.User, cf.Config.Entrypoint)
	}
	files := filesOf(t, img)
	for _, f := range []string{"/usr/local/bin/dlc", "/etc/passwd", "/home/nonroot", "/tmp"} {
		if _, ok := files[f]; !ok {
			t.Errorf("no %s in the image", f)
		}
	}
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != img.Ref {
		t.Fatalf("OCI layout index %+v, want one image named %s", m.Manifests, img.Ref)
	}
	// The same image in both: one config (the docker archive's manifest has other media
	// types, so the manifests' digests differ).
	fromLayout, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fromLayout.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	want, err := v1img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the layout's image has config %s, the tarball's %s", got, want)
	}
}
