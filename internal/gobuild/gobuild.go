// Package gobuild builds this module's programs (dlc, the example trainer) once per
// state of the source tree and shares the binary between everything that needs it: the
// test packages that start dlc processes, the image builder (package images), and the
// processes of one test run, which `go test` runs several at a time.
//
// Every binary is static (CGO_ENABLED=0, -trimpath, stripped), so the one build runs on
// the host and inside OpenDLC's images alike. It is cached under
// <cache>/opendlc/bin/<name>-<key>/<name>, where the key hashes the Go version, the
// target, the build's flags and the content of every file git sees in the tree (tracked
// and untracked, .gitignore respected): any change to the tree builds anew, an unchanged
// tree links nothing. Binaries carry no VCS stamp (-buildvcs=false), so a commit that
// changes no file changes no binary; the image labels carry the revision instead. The
// newest few builds of each program are kept.
//
// Without it a test run linked dlc once per package that starts it (eight, each a
// 100 MB binary) and once more, static, for every image built from it.
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/opendlc/opendlc/internal/tools"
)

// EnvDir names the environment variable that overrides the cache directory.
const EnvDir = "OPENDLC_BIN_DIR"

// keep is how many builds of each program the cache holds.
const keep = 4

// Target is the platform a binary is built for.
type Target struct{ GOOS, GOARCH string }

// Host is the platform of this process.
func Host() Target { return Target{runtime.GOOS, runtime.GOARCH} }

// Options are what a build may vary.
type Options struct {
	// Target is the platform; the zero value means Host.
	Target Target
}

// Dir returns the cache directory: $OPENDLC_BIN_DIR when set, otherwise opendlc/bin under
// the user's cache directory.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "opendlc", "bin")
}

// Static returns the path of the main package pkg of the module at root (such as
// "./cmd/dlc") built static, building it first when the cache holds no build of the
// tree as it is. Processes that ask at once wait for one build. The file must not be
// written to: copy it (Copy) to change it.
func Static(ctx context.Context, root, pkg string, opts Options) (string, error) {
	if opts.Target == (Target{}) {
		opts.Target = Host()
	}
	name := path.Base(filepath.ToSlash(pkg))
	key, err := treeKey(ctx, root, pkg, opts)
	if err != nil {
		return "", err
	}
	dir := Dir()
	final := filepath.Join(dir, name+"-"+key, name)
	if isFile(final) {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	unlock, err := tools.Lock(ctx, filepath.Join(dir, name+"-"+key+".lock"))
	if err != nil {
		return "", fmt.Errorf("gobuild: lock %s: %w", name, err)
	}
	defer unlock()
	if isFile(final) { // built by another process while we waited
		return final, nil
	}
	tmp, err := os.MkdirTemp(dir, ".build-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := Build(ctx, root, pkg, filepath.Join(tmp, name), opts); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, filepath.Dir(final)); err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	prune(dir, name, filepath.Dir(final))
	return final, nil
}

// Copy builds pkg as Static does and copies the binary to out (a hard link where the
// file systems allow).
func Copy(ctx context.Context, root, pkg, out string, opts Options) error {
	src, err := Static(ctx, root, pkg, opts)
	if err != nil {
		return err
	}
	_ = os.Remove(out)
	if os.Link(src, out) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("gobuild: %w", err)
	}
	defer in.Close()
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("gobuild: %w", err)
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return fmt.Errorf("gobuild: %w", err)
	}
	return f.Close()
}

// flags are the go build flags of a build, before -o.
func flags() []string {
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w"}
}

// Build builds the main package pkg of the module at root into out, static as Static
// builds, without the cache: for sources outside the tree (the pause image's program).
func Build(ctx context.Context, root, pkg, out string, opts Options) error {
	if opts.Target == (Target{}) {
		opts.Target = Host()
	}
	cmd := exec.CommandContext(ctx, "go", append(flags(), "-o", out, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+opts.Target.GOOS, "GOARCH="+opts.Target.GOARCH, "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gobuild: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// treeKey hashes what the build depends on: the go command's version, the package, the
// target and flags, and every file of the tree that git sees.
func treeKey(ctx context.Context, root, pkg string, opts Options) (string, error) {
	h := sha256.New()
	goVersion, err := output(ctx, root, "go", "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "gobuild/1\x00%s\x00%s\x00%s/%s\x00%q\x00", goVersion, pkg, opts.Target.GOOS, opts.Target.GOARCH, flags())
	list, err := output(ctx, root, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return "", err
	}
	files := strings.Split(strings.TrimRight(list, "\x00"), "\x00")
	sort.Strings(files)
	for _, f := range slices.Compact(files) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted but not yet staged
		}
		if err != nil {
			return "", fmt.Errorf("gobuild: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gobuild: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// prune removes all but the newest keep builds of the program name, never current.
func prune(dir, name, current string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type build struct {
		path string
		mod  int64
	}
	var builds []build
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), name+"-") || len(e.Name()) != len(name)+1+16 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if fi, err := e.Info(); err == nil && p != current {
			builds = append(builds, build{p, fi.ModTime().UnixNano()})
		}
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].mod > builds[j].mod })
	for i, b := range builds {
		if i >= keep-1 {
			os.RemoveAll(b.path)
			os.Remove(b.path + ".lock")
		}
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
