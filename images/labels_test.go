package images

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// OpenDLC's image carries the OCI labels of its source, revision (the checkout's HEAD)
// and version (the chart's appVersion), and its tarball holds the version's tag and the
// extra tags asked for, all naming the same image.
func TestDLCImageLabelsAndTags(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := BuildDLC(ctx, DLCOptions{Tags: []string{"upgrade-1"}})
	if err != nil {
		t.Fatal(err)
	}
	root, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The revision is the commit the tree was at when built: a commit of the checkout, at
	// or before its HEAD now (others may commit meanwhile).
	if len(d.Revision) != 40 {
		t.Fatalf("revision %q, want a commit id", d.Revision)
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "merge-base", "--is-ancestor", d.Revision, "HEAD").CombinedOutput(); err != nil {
		t.Errorf("revision %s is no commit at or before HEAD: %v %s", d.Revision, err, out)
	}
	version, _, err := sourceVersion(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if version == "" || d.Version != version {
		t.Errorf("version %q, want the chart's appVersion %q", d.Version, version)
	}
	want := map[string]string{
		LabelTitle: "opendlc", LabelSource: SourceURL,
		LabelRevision: d.Revision, LabelVersion: version,
	}
	wantRefs := []string{d.Ref, Domain + "/dlc:" + version, Domain + "/dlc:upgrade-1"}
	if !slices.Equal(d.Refs, wantRefs) {
		t.Errorf("refs %q, want %q", d.Refs, wantRefs)
	}
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(d.Tarball) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || !slices.Equal(slices.Sorted(slices.Values(manifest[0].RepoTags)), slices.Sorted(slices.Values(wantRefs))) {
		t.Fatalf("tarball manifest %+v, want one image tagged %q", manifest, wantRefs)
	}
	for _, r := range wantRefs {
		tag, err := nameTag(r)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(d.Tarball, &tag)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", r, k, cf.Config.Labels[k], v)
			}
		}
	}
	// A tag that is none is refused, naming it, before anything is built.
	if _, err := BuildDLC(ctx, DLCOptions{Tags: []string{"v1:bad"}, LayoutDir: filepath.Join(t.TempDir(), "x")}); err == nil ||
		!strings.Contains(err.Error(), `"v1:bad"`) {
		t.Errorf("BuildDLC with tag v1:bad: %v, want an error naming it", err)
	}
}
