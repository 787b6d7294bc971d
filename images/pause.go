package images

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/opendlc/opendlc/internal/gobuild"
)

//go:embed pause/main.go
var pauseSource []byte

// Pause builds (once per source and Go version) the sandbox image of kubestack's real
// nodes: pause/main.go compiled statically, alone in the image as /pause.
func Pause(ctx context.Context) (Image, error) {
	key := hashOf("pause/1", runtime.Version(), string(pauseSource))
	return cached(ctx, "pause", key, func(scratch string) ([]tagged, error) {
		src := filepath.Join(scratch, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module pause\n\ngo 1.22\n"), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, "main.go"), pauseSource, 0o644); err != nil {
			return nil, err
		}
		bin := filepath.Join(scratch, "pause")
		if err := gobuild.Build(ctx, src, ".", bin, gobuild.Options{Target: imageTarget}); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		layer, err := memLayer([]file{{path: "/pause", mode: 0o755, data: data}})
		if err != nil {
			return nil, err
		}
		img, err := newImage(v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, layer)
		if err != nil {
			return nil, err
		}
		return []tagged{{ref: ref("pause", key), img: img}}, nil
	})
}

// imageTarget is the platform of every image built here, and of the binaries in them.
var imageTarget = gobuild.Target{GOOS: "linux", GOARCH: "amd64"}
