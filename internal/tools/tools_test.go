package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDir(t *testing.T) {
	t.Setenv(EnvDir, "/some/where")
	if got := Dir(); got != "/some/where" {
		t.Errorf("Dir() = %q, want the %s override", got, EnvDir)
	}
	t.Setenv(EnvDir, "")
	if got := Dir(); !strings.HasSuffix(got, filepath.Join("opendlc", "tools")) {
		t.Errorf("Dir() = %q, want it under opendlc/tools", got)
	}
}

func TestListIsPinned(t *testing.T) {
	for _, name := range []string{"temporal", "versitygw", "workflowcheck", "golangci-lint", "helm"} {
		tool, ok := Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%q): not found", name)
		}
		if !strings.HasPrefix(tool.Version, "v") || tool.Package == "" {
			t.Errorf("%s: want a package and a pinned version, got %+v", name, tool)
		}
	}
	l := List()
	l[0].Version = "mutated"
	if List()[0].Version == "mutated" {
		t.Error("List returned the package's own slice")
	}
}

func TestEnsureUnknown(t *testing.T) {
	_, err := Ensure(context.Background(), "no-such-tool")
	if !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Ensure(unknown) = %v, want ErrUnknownTool", err)
	}
}

var fakeTool = Tool{Name: "fake", Package: "example.com/fake", Version: "v1.2.3"}

// fakeBuild writes a small file as the "binary" and records each build in
// <dir>/builds.log, so tests can count builds across goroutines and processes.
func fakeBuild(dir string) func(context.Context, Tool, string) error {
	return func(_ context.Context, tool Tool, gobin string) error {
		f, err := os.OpenFile(filepath.Join(dir, "builds.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(f, os.Getpid())
		f.Close()
		// Write the binary slowly, so an unlocked reader would see it half done.
		bin := filepath.Join(gobin, tool.binaryName())
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		fa, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer fa.Close()
		_, err = fa.WriteString("echo fake\n")
		return err
	}
}

func countBuilds(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "builds.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func checkBinary(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "#!/bin/sh\necho fake\n" {
		t.Errorf("%s holds %q: a partly written binary", path, b)
	}
}

func TestEnsureConcurrentGoroutines(t *testing.T) {
	dir := t.TempDir()
	in := installer{dir: dir, build: fakeBuild(dir)}
	var wg sync.WaitGroup
	paths := make([]string, 8)
	errs := make([]error, 8)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = in.ensure(context.Background(), fakeTool) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if paths[i] != fakeTool.Path(dir) {
			t.Errorf("caller %d got %q, want %q", i, paths[i], fakeTool.Path(dir))
		}
		checkBinary(t, paths[i])
	}
	if n := countBuilds(t, dir); n != 1 {
		t.Errorf("built %d times, want 1", n)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary build dirs left behind: %v", leftovers)
	}
}

// TestEnsureConcurrentProcesses runs several copies of the test binary at
// once, as `go test ./...` does with packages that all need the same tool.
func TestEnsureConcurrentProcesses(t *testing.T) {
	if dir := os.Getenv("TOOLS_TEST_HELPER_DIR"); dir != "" {
		path, err := installer{dir: dir, build: fakeBuild(dir)}.ensure(context.Background(), fakeTool)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(path)
		os.Exit(0)
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, 4)
	errs := make([]error, 4)
	for i := range outs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEnsureConcurrentProcesses$")
			cmd.Env = append(os.Environ(), "TOOLS_TEST_HELPER_DIR="+dir)
			outs[i], errs[i] = cmd.Output()
		})
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("helper %d: %v", i, errs[i])
		}
		if got := string(outs[i]); got != fakeTool.Path(dir) {
			t.Errorf("helper %d printed %q, want %q", i, got, fakeTool.Path(dir))
		}
	}
	checkBinary(t, fakeTool.Path(dir))
	if n := countBuilds(t, dir); n != 1 {
		t.Errorf("built %d times across processes, want 1", n)
	}
}

func TestEnsureBuildFailure(t *testing.T) {
	dir := t.TempDir()
	in := installer{dir: dir, build: func(context.Context, Tool, string) error { return errors.New("boom") }}
	if _, err := in.ensure(context.Background(), fakeTool); err == nil {
		t.Fatal("want the build error")
	}
	if isFile(fakeTool.Path(dir)) {
		t.Error("a failed build left a binary in the cache")
	}
	// A later attempt builds again.
	in.build = fakeBuild(dir)
	if _, err := in.ensure(context.Background(), fakeTool); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockFile(context.Background(), filepath.Join(dir, fakeTool.Name+"@"+fakeTool.Version+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = installer{dir: dir, build: fakeBuild(dir)}.ensure(ctx, fakeTool)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ensure while locked = %v, want DeadlineExceeded", err)
	}
}

func TestGoInstallReportsOutput(t *testing.T) {
	bad := Tool{Name: "nope", Package: "example.invalid/does/not/exist", Version: "v0.0.1"}
	t.Setenv("GOPROXY", "off")
	err := goInstall(context.Background(), bad, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "example.invalid") {
		t.Fatalf("goInstall(bad) = %v, want an error quoting go's output", err)
	}
}
