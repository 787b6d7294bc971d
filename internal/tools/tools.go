// Package tools builds the external programs OpenDLC runs (the Temporal dev
// server, the versitygw S3 gateway, workflowcheck) from pinned Go module
// versions and caches the binaries by version, so every developer and every
// test run uses exactly the same build without a separate install step.
package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrUnknownTool is returned by Ensure for a name that is not in the pinned table.
var ErrUnknownTool = errors.New("tools: unknown tool")

// EnvDir names the environment variable that overrides the cache directory.
const EnvDir = "OPENDLC_TOOLS_DIR"

// Tool is one pinned program: the Go package that provides its main and the
// module version it is built at.
type Tool struct {
	// Name is the binary name and the key passed to Ensure, e.g. "temporal".
	Name string
	// Package is the import path of the main package, e.g. "github.com/temporalio/cli/cmd/temporal".
	Package string
	// Version is the module version given to go install, e.g. "v1.5.1".
	Version string
}

// String returns the argument given to go install, package@version.
func (t Tool) String() string { return t.Package + "@" + t.Version }

// Path returns where the tool's binary lives (or will live) in the cache
// directory dir: <dir>/<name>@<version>/<name>.
func (t Tool) Path(dir string) string {
	return filepath.Join(dir, t.Name+"@"+t.Version, t.binaryName())
}

func (t Tool) binaryName() string {
	if runtime.GOOS == "windows" {
		return t.Name + ".exe"
	}
	return t.Name
}

// pinned is the table of tools; change a version here and every caller
// rebuilds it once, into a new cache entry.
var pinned = []Tool{
	{Name: "temporal", Package: "github.com/temporalio/cli/cmd/temporal", Version: "v1.5.1"},
	{Name: "versitygw", Package: "github.com/versity/versitygw/cmd/versitygw", Version: "v1.8.0"},
	{Name: "workflowcheck", Package: "go.temporal.io/sdk/contrib/tools/workflowcheck", Version: "v0.6.0"},
}

// List returns the pinned tools, in a stable order.
func List() []Tool { return slices.Clone(pinned) }

// Lookup returns the pinned tool called name.
func Lookup(name string) (Tool, bool) {
	i := slices.IndexFunc(pinned, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return pinned[i], true
}

// Dir returns the cache directory: $OPENDLC_TOOLS_DIR when set, otherwise
// opendlc/tools under the user's cache directory.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "opendlc", "tools")
}

// Ensure returns the path of the named tool's binary, building it with
// `go install` first when the cache does not hold it yet. It is safe to call
// from many processes at once: one builds while the others wait on a file
// lock, and nobody ever sees a partly written binary.
func Ensure(ctx context.Context, name string) (string, error) {
	t, ok := Lookup(name)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	return installer{dir: Dir(), build: goInstall}.ensure(ctx, t)
}

// installer holds what ensure needs, so tests can swap the build step.
type installer struct {
	dir string
	// build installs t into the empty directory gobin.
	build func(ctx context.Context, t Tool, gobin string) error
}

func (in installer) ensure(ctx context.Context, t Tool) (string, error) {
	final := t.Path(in.dir)
	if isFile(final) {
		return final, nil
	}
	if err := os.MkdirAll(in.dir, 0o755); err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(in.dir, t.Name+"@"+t.Version+".lock"))
	if err != nil {
		return "", fmt.Errorf("tools: lock %s: %w", t.Name, err)
	}
	defer unlock()
	// Another process may have finished the build while we waited.
	if isFile(final) {
		return final, nil
	}

	tmpPrefix := ".build-" + t.Name + "@" + t.Version + "-"
	removeStale(in.dir, tmpPrefix) // leftovers of a build that crashed; we hold the lock
	gobin, err := os.MkdirTemp(in.dir, tmpPrefix)
	if err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	defer os.RemoveAll(gobin)

	if err := in.build(ctx, t, gobin); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	if err := os.Rename(filepath.Join(gobin, t.binaryName()), final); err != nil {
		return "", fmt.Errorf("tools: install %s: %w", t.Name, err)
	}
	return final, nil
}

// goInstall runs `go install package@version` with GOBIN=gobin. The build
// output is kept quiet unless the build fails.
func goInstall(ctx context.Context, t Tool, gobin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("tools: building %s needs the go command: %w", t.Name, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "install", t.String())
	cmd.Dir = gobin // outside any module or workspace of the caller
	// The binary must run here, whatever GOOS/GOARCH the caller exported.
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		return fmt.Errorf("tools: go install %s failed after %s: %w\n%s",
			t, time.Since(start).Round(time.Second), err, lastLines(out.String(), 15))
	}
	return nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func removeStale(dir, prefix string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
