// Package images builds OpenDLC's container images without Docker, from the repository
// and Debian's packages, with go-containerregistry:
//
//   - Pause: the sandbox image of kubestack's real nodes (a static Go program, pause/);
//   - Busybox: a small image of Debian's static busybox, for tests that need a quick container;
//   - DLC: OpenDLC's own image, the dlc binary as a non-root user (`task image`);
//   - Training: Debian with PyTorch, XGBoost, Open MPI, mpi4py, an ssh server and the
//     project's Python library and examples (examples/trainer built static), its base
//     built by mmdebstrap (a Debian package), in two variants: root, and the non-root
//     user trainer (uid 1000).
//
// Each image is written as a docker-archive tarball (what `ctr images import` and
// `docker load` read) and cached under Dir() by the hash of its inputs, so a second
// build with the same inputs reads the cache and a changed input rebuilds only what it
// feeds. Image references are under the registry-like domain opendlc.local, which the
// CRI keeps as it is (a bare name would be rewritten to docker.io/...).
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/opendlc/opendlc/internal/tools"
)

// EnvDir names the environment variable that overrides the image cache directory.
const EnvDir = "OPENDLC_IMAGES_DIR"

// Domain is the registry part of every image reference this package makes.
const Domain = "opendlc.local"

// Image is a built image.
type Image struct {
	// Ref is the image's reference, e.g. opendlc.local/pause:1a2b3c4d5e6f.
	Ref string
	// Tarball is the docker-archive file holding it (and, for Training, the other
	// variant too).
	Tarball string
}

// Dir returns the image cache: $OPENDLC_IMAGES_DIR when set, otherwise images beside
// the tools' cache (~/.cache/opendlc/images).
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(tools.Dir()), "images")
}

// hashOf returns the hex SHA-256 of parts, each length-prefixed so that no two lists
// of parts collide.
func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashTree hashes the regular files under root whose names keep accepts (paths
// relative to root, slash-separated), names and contents, in a stable order.
func hashTree(root string, keep func(rel string) bool) (string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && keep(filepath.ToSlash(rel)) {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", fmt.Errorf("images: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cached returns the image cached under name and key, building it first when the
// cache does not hold it: build gets a scratch directory and returns the images to
// write, by reference (the first is the one returned). One process builds while the
// others wait on a lock; nobody sees a partly written tarball.
func cached(ctx context.Context, imageName, key string, build func(scratch string) ([]tagged, error)) (Image, error) {
	dir := filepath.Join(Dir(), imageName+"-"+key[:16])
	tarPath := filepath.Join(dir, imageName+".tar")
	refPath := filepath.Join(dir, "ref")
	if img, ok := readCached(tarPath, refPath); ok {
		return img, nil
	}
	if err := os.MkdirAll(Dir(), 0o755); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	unlock, err := tools.Lock(ctx, filepath.Join(Dir(), imageName+".lock"))
	if err != nil {
		return Image{}, fmt.Errorf("images: lock %s: %w", imageName, err)
	}
	defer unlock()
	if img, ok := readCached(tarPath, refPath); ok {
		return img, nil
	}
	scratch, err := os.MkdirTemp(Dir(), imageName+"-build-")
	if err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(scratch)
	imgs, err := build(scratch)
	if err != nil {
		return Image{}, fmt.Errorf("images: build %s: %w", imageName, err)
	}
	refs := make(map[name.Reference]v1.Image, len(imgs))
	for _, t := range imgs {
		ref, err := nameTag(t.ref)
		if err != nil {
			return Image{}, err
		}
		refs[ref] = t.img
	}
	tmpTar := filepath.Join(scratch, imageName+".tar")
	if err := tarball.MultiRefWriteToFile(tmpTar, refs); err != nil {
		return Image{}, fmt.Errorf("images: write %s: %w", imageName, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	// The ref file is written last: its presence says the tarball is complete.
	if err := os.Rename(tmpTar, tarPath); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	if err := os.WriteFile(refPath, []byte(imgs[0].ref+"\n"), 0o644); err != nil {
		return Image{}, fmt.Errorf("images: %w", err)
	}
	pruneOthers(imageName, dir)
	return Image{Ref: imgs[0].ref, Tarball: tarPath}, nil
}

// pruneOthers removes the cache's other builds of imageName (older inputs): the
// training image is 700 MB a build, and every change to examples/ makes one.
func pruneOthers(imageName, keep string) {
	entries, err := os.ReadDir(Dir())
	if err != nil {
		return
	}
	for _, e := range entries {
		key, ok := strings.CutPrefix(e.Name(), imageName+"-")
		if !ok || len(key) != 16 || strings.Trim(key, "0123456789abcdef") != "" || filepath.Join(Dir(), e.Name()) == keep {
			continue
		}
		_ = os.RemoveAll(filepath.Join(Dir(), e.Name()))
	}
}

func readCached(tarPath, refPath string) (Image, bool) {
	ref, err := os.ReadFile(refPath)
	if err != nil {
		return Image{}, false
	}
	if _, err := os.Stat(tarPath); err != nil {
		return Image{}, false
	}
	return Image{Ref: strings.TrimSpace(string(ref)), Tarball: tarPath}, true
}

// tagged is an image and the reference it is written under.
type tagged struct {
	ref string
	img v1.Image
}

func nameTag(ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("images: reference %q: %w", ref, err)
	}
	return t, nil
}

// ref is Domain/name:the first 12 characters of key.
func ref(imageName, key string) string { return Domain + "/" + imageName + ":" + key[:12] }

// file is one entry of a layer built in memory.
type file struct {
	path string // absolute in the image, e.g. /usr/local/bin/dlc
	mode int64  // with the directory bit for directories
	data []byte
	dir  bool
	link string // a hard link to this path, when set
	uid  int
}

// memLayer packs files (parents first) into an uncompressed OCI layer.
func memLayer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the layer's digest a function of its contents.
	epoch := time.Unix(0, 0)
	for _, f := range files {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, ModTime: epoch, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		switch {
		case f.dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case f.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeLink, strings.TrimPrefix(f.link, "/"), 0o755
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// newImage is an OCI image of layers with config cfg (its rootfs and history are
// filled in by mutate).
func newImage(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = imageTarget.GOARCH, imageTarget.GOOS
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return img, nil
}

// errNoSource is returned when the repository's files an image packs are not found.
var errNoSource = errors.New("images: OpenDLC source tree not found (run from the repository)")

// sourceRoot finds the repository root: the nearest directory at or above the working
// directory with go.mod and python/opendlc.
func sourceRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "python", "opendlc", "__init__.py")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", errNoSource
		}
	}
}

// loadTarball reads img back from its tarball.
func loadTarball(img Image) (v1.Image, error) {
	tag, err := nameTag(img.Ref)
	if err != nil {
		return nil, err
	}
	out, err := tarball.ImageFromPath(img.Tarball, &tag)
	if err != nil {
		return nil, fmt.Errorf("images: read %s: %w", img.Tarball, err)
	}
	return out, nil
}
