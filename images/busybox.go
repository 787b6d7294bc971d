package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// busyboxPath is where Debian's busybox-static package installs its static binary.
const busyboxPath = "/bin/busybox"

// busyboxApplets are the commands the small image links to busybox.
var busyboxApplets = []string{"sh", "echo", "cat", "ls", "sleep", "env", "id", "test", "true", "false", "wget", "nslookup", "hostname"}

// Busybox builds a small image from the machine's static busybox (Debian's
// busybox-static): /bin/busybox and a link per common applet, for tests that need a
// container that starts in milliseconds (pulls from a registry, image errors, probes).
// Cached by the binary's hash.
func Busybox(ctx context.Context) (Image, error) {
	data, err := os.ReadFile(busyboxPath)
	if err != nil {
		return Image{}, fmt.Errorf("images: the busybox image needs %s (apt-get install busybox-static; `task deps` installs it): %w", busyboxPath, err)
	}
	sum := sha256.Sum256(data)
	key := hashOf("busybox/1", hex.EncodeToString(sum[:]))
	return cached(ctx, "busybox", key, func(string) ([]tagged, error) {
		files := []file{
			{path: "/bin", mode: 0o755, dir: true},
			{path: "/bin/busybox", mode: 0o755, data: data},
			{path: "/tmp", mode: 0o1777, dir: true},
		}
		for _, a := range busyboxApplets {
			files = append(files, file{path: "/bin/" + a, link: "/bin/busybox"})
		}
		layer, err := memLayer(files)
		if err != nil {
			return nil, err
		}
		img, err := newImage(v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}}, layer)
		if err != nil {
			return nil, err
		}
		return []tagged{{ref: ref("busybox", key), img: img}}, nil
	})
}
