package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/opendlc/opendlc/internal/gobuild"
)

// NonRootUID is the user OpenDLC's own image runs as (the distroless convention's
// "nonroot", 65532), with the same group.
const NonRootUID = 65532

// DLC builds OpenDLC's own image from the source tree: the dlc binary (static, as
// /usr/local/bin/dlc, the entrypoint), run as NonRootUID with a writable /tmp and HOME.
// It is cached by the hash of the binary; the Go build cache makes the rebuild of an
// unchanged tree quick. When layoutDir is not empty the image is also written there as an
// OCI image layout. It is BuildDLC without more tags.
func DLC(ctx context.Context, layoutDir string) (Image, error) {
	d, err := BuildDLC(ctx, DLCOptions{LayoutDir: layoutDir})
	return d.Image, err
}

// BuildDLC builds OpenDLC's own image (DLC), labelled with the OCI labels of its source,
// revision and version (labels.go) and tagged, beside the cache's tag, with the version
// (Domain/dlc:VERSION, the chart's default tag) and opts.Tags.
func BuildDLC(ctx context.Context, opts DLCOptions) (DLCImage, error) {
	if err := checkTags(opts.Tags); err != nil {
		return DLCImage{}, err
	}
	layoutDir := opts.LayoutDir
	root, err := sourceRoot()
	if err != nil {
		return DLCImage{}, err
	}
	version, revision, err := sourceVersion(ctx, root)
	if err != nil {
		return DLCImage{}, err
	}
	labels := map[string]string{
		LabelTitle: "opendlc", LabelSource: SourceURL, LabelRevision: revision, LabelVersion: version,
	}
	d := DLCImage{Version: version, Revision: revision, Labels: labels}
	bin, err := gobuild.Static(ctx, root, "./cmd/dlc", gobuild.Options{Target: imageTarget})
	if err != nil {
		return DLCImage{}, fmt.Errorf("images: %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return DLCImage{}, err
	}
	sum := sha256.Sum256(data)
	key := hashOf(append([]string{"dlc/2", hex.EncodeToString(sum[:]), version, revision}, opts.Tags...)...)
	d.Refs = []string{ref("dlc", key), Domain + "/dlc:" + version}
	for _, t := range opts.Tags {
		d.Refs = append(d.Refs, Domain+"/dlc:"+t)
	}
	var built v1.Image
	img, err := cached(ctx, "dlc", key, func(string) ([]tagged, error) {
		layer, err := memLayer(nonRootBinary("/usr/local/bin/dlc", data))
		if err != nil {
			return nil, err
		}
		built, err = newImage(v1.Config{
			Entrypoint: []string{"/usr/local/bin/dlc"},
			User:       "65532:65532",
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
			Labels:     labels,
		}, layer)
		if err != nil {
			return nil, err
		}
		out := make([]tagged, 0, len(d.Refs))
		for _, r := range d.Refs {
			out = append(out, tagged{ref: r, img: built})
		}
		return out, nil
	})
	d.Image = img
	if err != nil || layoutDir == "" {
		return d, err
	}
	if built == nil { // from the cache: read it back from the tarball
		if built, err = loadTarball(img); err != nil {
			return DLCImage{}, err
		}
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return DLCImage{}, err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return DLCImage{}, err
	}
	return d, p.AppendImage(built, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": img.Ref}))
}

// nonRootBinary is the one layer of an image that runs a static binary as NonRootUID:
// the binary at path, /etc/passwd and /etc/group naming root and the non-root user, its
// home and a writable /tmp (the dlc image and the component images).
func nonRootBinary(path string, data []byte) []file {
	return []file{
		{path: "/etc", mode: 0o755, dir: true},
		{path: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "/home", mode: 0o755, dir: true},
		{path: "/home/nonroot", mode: 0o700, dir: true, uid: NonRootUID},
		{path: "/tmp", mode: 0o1777, dir: true},
		{path: "/usr", mode: 0o755, dir: true},
		{path: "/usr/local", mode: 0o755, dir: true},
		{path: "/usr/local/bin", mode: 0o755, dir: true},
		{path: path, mode: 0o755, data: data},
	}
}
