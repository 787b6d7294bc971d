package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/opendlc/opendlc/internal/tools"
)

// Components are the tools of the pinned table (internal/tools) that Component makes
// images of: the servers the test installation runs in its cluster beside OpenDLC
// (integration/install), in place of the Temporal, NATS and S3 a user brings.
var Components = []string{"nats-server", "temporal", "versitygw"}

// componentSources are the repositories the components' modules come from
// (LabelSource of their images).
var componentSources = map[string]string{
	"nats-server": "https://github.com/nats-io/nats-server",
	"temporal":    "https://github.com/temporalio/cli",
	"versitygw":   "https://github.com/versity/versitygw",
}

// ComponentImage is the image of one of the Components.
type ComponentImage struct {
	// Image.Ref is Domain/NAME:VERSION, the tool's pinned version.
	Image
	// Name is the tool's name (the image's), Version its module version
	// (LabelVersion and the tag).
	Name, Version string
	// Entrypoint is the binary's path in the image, the image's entrypoint.
	Entrypoint string
	// Labels are the image config's labels.
	Labels map[string]string
}

// Component builds the image of the pinned tool name, one of Components: its binary,
// built static (CGO off, stripped, for the images' platform) from the pinned module
// version with `go install`, as /usr/local/bin/NAME (the entrypoint), run as NonRootUID
// with a writable /tmp and HOME. It has one layer and is tagged Domain/NAME:VERSION,
// labelled with the upstream repository (LabelSource), the version (LabelVersion) and,
// as the revision, the version's tag (LabelRevision: the module proxy gives no commit).
//
// The tools' own cache (tools.Ensure) holds the host's binaries, built with their own
// linker flags (and, before tools were built static, linking the C library); so the
// image has its own build, which compiles as the tools' build does (static, trimmed
// paths) and so reuses its packages from the Go build cache: only the link is its
// own. The image is cached by its inputs (the module version, the linker flags and
// the Go version) and a cached image builds nothing.
func Component(ctx context.Context, name string) (ComponentImage, error) {
	source, ok := componentSources[name]
	if !ok {
		return ComponentImage{}, fmt.Errorf("images: no component image %q (have %v)", name, Components)
	}
	t, ok := tools.Lookup(name)
	if !ok {
		return ComponentImage{}, fmt.Errorf("images: %q is not in the pinned tools", name)
	}
	ldflags := t.LDFlags
	if ldflags == "" {
		ldflags = "-s -w"
	}
	if !tagPattern.MatchString(t.Version) {
		return ComponentImage{}, fmt.Errorf("images: version %q of %s is not a valid image tag", t.Version, name)
	}
	labels := map[string]string{
		LabelTitle: name, LabelSource: source, LabelVersion: t.Version, LabelRevision: t.Version,
	}
	c := ComponentImage{
		Name: name, Version: t.Version, Entrypoint: "/usr/local/bin/" + name, Labels: labels,
	}
	key := hashOf("component/1", t.String(), ldflags, runtime.Version(), imageTarget.GOOS, imageTarget.GOARCH)
	img, err := cached(ctx, name, key, func(scratch string) ([]tagged, error) {
		data, err := staticTool(ctx, t, ldflags, scratch)
		if err != nil {
			return nil, err
		}
		layer, err := memLayer(nonRootBinary(c.Entrypoint, data))
		if err != nil {
			return nil, err
		}
		built, err := newImage(v1.Config{
			Entrypoint: []string{c.Entrypoint},
			User:       "65532:65532",
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
			Labels:     labels,
		}, layer)
		if err != nil {
			return nil, err
		}
		return []tagged{{ref: Domain + "/" + name + ":" + t.Version, img: built}}, nil
	})
	c.Image = img
	return c, err
}

// staticTool builds t's binary static for the images' platform into dir and returns
// it: `go install package@version` outside any module, with CGO off.
func staticTool(ctx context.Context, t tools.Tool, ldflags, dir string) ([]byte, error) {
	gobin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags", ldflags, t.String())
	cmd.Dir = dir // outside any module or workspace of the caller
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") }),
		"GOBIN="+gobin, "CGO_ENABLED=0", "GOOS="+imageTarget.GOOS, "GOARCH="+imageTarget.GOARCH, "GOFLAGS=-buildvcs=false", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go install %s (static) failed after %s: %w\n%s", t, time.Since(start).Round(time.Second), err, out.Bytes())
	}
	bin := t.Bin
	if bin == "" {
		bin = t.Name
	}
	return os.ReadFile(filepath.Join(gobin, bin))
}
