package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrNoSource is returned by Ensure for a tool built from a Module when the
// OpenDLC source tree that holds the Module cannot be found.
var ErrNoSource = errors.New("tools: OpenDLC source tree not found")

// rootModule is the module path of the source tree's root go.mod.
const rootModule = "github.com/opendlc/opendlc"

// srcMarker separates a Module tool's pinned version from its source hash.
const srcMarker = "+src."

// resolve fills in a Module tool's source directory and appends the hash of
// that directory's sources to its Version. Other tools come back unchanged.
func resolve(t Tool) (Tool, error) {
	if t.Module == "" || t.srcDir != "" {
		return t, nil
	}
	root, err := sourceRoot()
	if err != nil {
		return t, fmt.Errorf("tools: %s is built from %s: %w", t.Name, t.Module, err)
	}
	return resolveIn(t, root)
}

// resolveIn is resolve with the source tree at root.
func resolveIn(t Tool, root string) (Tool, error) {
	dir := filepath.Join(root, filepath.FromSlash(t.Module))
	hash, err := hashModule(dir)
	if err != nil {
		return t, fmt.Errorf("tools: %s is built from %s: %w", t.Name, t.Module, err)
	}
	t.srcDir = dir
	t.Version += srcMarker + hash
	return t, nil
}

// sourceHash returns the hash that resolve appended to Version.
func (t Tool) sourceHash() string {
	_, h, _ := strings.Cut(t.Version, srcMarker)
	return h
}

// sourceRoot finds the root of the OpenDLC source tree: the nearest
// directory at or above the working directory whose go.mod declares the
// root module (tests run in their package's directory, the Taskfile at the
// root), else the tree this package was compiled from.
func sourceRoot() (string, error) {
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if isRootModule(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		d := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if isRootModule(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (looked for a go.mod declaring module %s above the working directory)", ErrNoSource, rootModule)
}

func isRootModule(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == rootModule
		}
	}
	return false
}

// hashModule hashes what decides a Module's build: its go.mod, go.sum and
// Go files, by relative path. Twelve hex digits are plenty to tell versions apart.
func hashModule(dir string) (string, error) {
	if !isFile(filepath.Join(dir, "go.mod")) {
		return "", fmt.Errorf("no go.mod in %s", dir)
	}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	h := sha256.New()
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// goBuildModule builds every tool in ts with one `go build -o gobin/ pkgs...`
// in their Module's directory, so the packages they share compile once.
func goBuildModule(ctx context.Context, ts []Tool, gobin string) error {
	if len(ts) == 0 {
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("tools: building %s needs the go command: %w", ts[0].Module, err)
	}
	var ldflags, pkgs, names []string
	for _, t := range ts {
		ldflags = append(ldflags, strings.Fields(t.LDFlags)...)
		pkgs = append(pkgs, t.Package)
		names = append(names, t.Name)
	}
	// The module's own go.mod decides every version (-mod=readonly, no
	// workspace of the caller); the binaries need no VCS stamp.
	args := []string{"build", "-mod=readonly", "-buildvcs=false", "-o", gobin + string(filepath.Separator)}
	if lf := dedupeLDFlags(ldflags); lf != "" {
		args = append(args, "-ldflags", lf)
	}
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = ts[0].srcDir
	// Binaries for this machine, whatever GOOS/GOARCH the caller exported.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		return fmt.Errorf("tools: go build of %s (%s) in %s failed after %s: %w\n%s",
			strings.Join(names, ", "), ts[0].Version, ts[0].srcDir, time.Since(start).Round(time.Second), err, lastLines(out.String(), 15))
	}
	return nil
}

// dedupeLDFlags joins linker flags, keeping the first of any repeated flag
// (-s, -w) or repeated -X assignment.
func dedupeLDFlags(fields []string) string {
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "-X" && i+1 < len(fields) {
			f = "-X " + fields[i+1]
			i++
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// SourceRoot returns the root of the OpenDLC source tree, found as the tools' modules
// are (the nearest root module at or above the working directory).
func SourceRoot() (string, error) { return sourceRoot() }
