package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	kube := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kwok"}
	tests := map[string]struct {
		names   []string
		want    []string
		wantErr error
	}{
		"none":           {names: nil, want: nil},
		"tools":          {names: []string{"temporal", "versitygw"}, want: []string{"temporal", "versitygw"}},
		"group":          {names: []string{"kube"}, want: kube},
		"group and more": {names: []string{"etcd", "temporal", "kube"}, want: append([]string{"etcd", "temporal"}, kube[1:]...)},
		"unknown":        {names: []string{"kube", "nope"}, wantErr: ErrUnknownTool},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Expand(tc.names...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Expand(%q) error = %v, want %v", tc.names, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Expand(%q) (-want +got):\n%s", tc.names, diff)
			}
		})
	}
}

// The table's versions are the ones tools/kube/go.mod pins, and every
// staging module k8s.io/kubernetes requires is replaced by its published
// twin at the matching minor version.
func TestKubeToolsMatchModule(t *testing.T) {
	root, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, kubeModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := string(gomod)
	for _, req := range []string{"k8s.io/kubernetes " + kubeVersion, "go.etcd.io/etcd/server/v3 " + etcdVersion} {
		if !regexp.MustCompile(`(?m)^\s*(require\s+)?` + regexp.QuoteMeta(req) + `(\s|$)`).MatchString(mod) {
			t.Errorf("%s/go.mod does not require %s", kubeModule, req)
		}
	}
	twin := "v0." + strings.TrimPrefix(kubeVersion, "v1.")
	replaces := regexp.MustCompile(`(?m)^\s*(k8s\.io/\S+) => (\S+) (\S+)$`).FindAllStringSubmatch(mod, -1)
	if len(replaces) < 30 {
		t.Errorf("%s/go.mod replaces %d modules, want every staging module (about 32)", kubeModule, len(replaces))
	}
	for _, r := range replaces {
		if r[1] != r[2] || r[3] != twin {
			t.Errorf("replace %s => %s %s, want %s => %s %s", r[1], r[2], r[3], r[1], r[1], twin)
		}
	}

	var hashes []string
	for _, tool := range List() {
		if tool.Module != kubeModule {
			continue
		}
		if !strings.Contains(tool.Version, srcMarker) {
			t.Errorf("%s: version %q lacks the source hash", tool.Name, tool.Version)
		}
		hashes = append(hashes, tool.sourceHash())
	}
	if len(hashes) != 6 || len(slices.Compact(hashes)) != 1 {
		t.Errorf("want the 6 tools of %s (etcd, the 3 control-plane commands, kubectl, the kubelet) with one source hash, got %v", kubeModule, hashes)
	}
}

func TestKubeLDFlags(t *testing.T) {
	got := kubeLDFlags("v1.36.3")
	for _, want := range []string{"gitVersion=v1.36.3", "gitMajor=1 ", "gitMinor=36 "} {
		if !strings.Contains(got, want) {
			t.Errorf("kubeLDFlags = %q, want it to contain %q", got, want)
		}
	}
}

func TestDedupeLDFlags(t *testing.T) {
	got := dedupeLDFlags(strings.Fields("-s -w -X a=1 -X b=2 -s -w -X a=1 -X c=3"))
	if want := "-s -w -X a=1 -X b=2 -X c=3"; got != want {
		t.Errorf("dedupeLDFlags = %q, want %q", got, want)
	}
}

func TestHashModule(t *testing.T) {
	dir := fakeModule(t)
	h1, err := hashModule(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "README.md"), "docs do not change the build")
	write(t, filepath.Join(dir, ".cache", "x.go"), "package hidden")
	if h, _ := hashModule(dir); h != h1 {
		t.Errorf("hash changed with files outside the build: %s -> %s", h1, h)
	}
	write(t, filepath.Join(dir, "go.sum"), "example.com/dep v1.0.1 h1:xyz=\n")
	h2, _ := hashModule(dir)
	if h2 == h1 {
		t.Error("hash unchanged after go.sum changed")
	}
	write(t, filepath.Join(dir, "cmd", "a", "main.go"), "package main\n\nfunc main() { println() }\n")
	if h3, _ := hashModule(dir); h3 == h2 {
		t.Error("hash unchanged after a Go file changed")
	}
	if _, err := hashModule(t.TempDir()); err == nil {
		t.Error("hashModule of a directory without go.mod: want an error")
	}
}

// fakeModule writes a small module under a fake source root and returns its directory.
func fakeModule(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module "+rootModule+"\n")
	dir := filepath.Join(root, "tools", "fake")
	write(t, filepath.Join(dir, "go.mod"), "module example.com/fake\n\ngo 1.26\n")
	write(t, filepath.Join(dir, "go.sum"), "")
	write(t, filepath.Join(dir, "cmd", "a", "main.go"), "package main\n\nfunc main() {}\n")
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeModuleBuild writes every tool's "binary" into gobin and counts builds.
func fakeModuleBuild(dir string) func(context.Context, []Tool, string) error {
	one := fakeBuild(dir)
	return func(ctx context.Context, ts []Tool, gobin string) error {
		if err := one(ctx, ts[0], gobin); err != nil { // counts one build
			return err
		}
		for _, t := range ts[1:] {
			if err := os.WriteFile(filepath.Join(gobin, t.binaryName()), []byte("#!/bin/sh\necho fake\n"), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
}

// Asking for any tool of a Module builds all of them once, under one lock,
// and a change to the Module's sources builds them again under a new version.
func TestModuleToolsShareOneBuild(t *testing.T) {
	modDir := fakeModule(t)
	root := filepath.Dir(filepath.Dir(modDir))
	table := []Tool{
		{Name: "fa", Package: "example.com/fake/cmd/a", Version: "v1.0.0", Module: "tools/fake"},
		{Name: "fb", Package: "example.com/fake/cmd/b", Version: "v1.0.0", Module: "tools/fake"},
		fakeTool,
	}
	resolved := func() (a, b Tool) {
		t.Helper()
		a, err := resolveIn(table[0], root)
		if err != nil {
			t.Fatal(err)
		}
		b, err = resolveIn(table[1], root)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	dir := t.TempDir()
	in := installer{dir: dir, build: fakeBuild(dir), buildModule: fakeModuleBuild(dir), table: table}
	a, b := resolved()
	if !strings.HasPrefix(a.Version, "v1.0.0+src.") || a.Version != b.Version {
		t.Fatalf("resolved versions %q and %q, want one v1.0.0+src.<hash>", a.Version, b.Version)
	}

	var wg sync.WaitGroup
	paths := make([]string, 6)
	errs := make([]error, 6)
	for i := range paths {
		tool := a
		if i%2 == 1 {
			tool = b
		}
		wg.Go(func() { paths[i], errs[i] = in.ensure(context.Background(), tool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := countBuilds(t, dir); n != 1 {
		t.Errorf("built %d times, want once for both tools", n)
	}
	checkBinary(t, a.Path(dir))
	checkBinary(t, b.Path(dir))
	if paths[0] != a.Path(dir) || paths[1] != b.Path(dir) {
		t.Errorf("paths %q, %q; want %q, %q", paths[0], paths[1], a.Path(dir), b.Path(dir))
	}

	// A version bump (here: go.sum) is a new cache entry, built once more.
	write(t, filepath.Join(modDir, "go.sum"), "example.com/dep v1.0.1 h1:xyz=\n")
	a2, b2 := resolved()
	if a2.Version == a.Version {
		t.Fatal("version unchanged after go.sum changed")
	}
	if _, err := in.ensure(context.Background(), b2); err != nil {
		t.Fatal(err)
	}
	if _, err := in.ensure(context.Background(), a2); err != nil {
		t.Fatal(err)
	}
	if n := countBuilds(t, dir); n != 2 {
		t.Errorf("built %d times in all, want 2", n)
	}
	checkBinary(t, a2.Path(dir))
}

// The source tree is found from the working directory (go test runs in the
// package's directory), and from where this package was compiled otherwise.
func TestSourceRoot(t *testing.T) {
	fromWD, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !isFile(filepath.Join(fromWD, "internal", "tools", "module.go")) {
		t.Errorf("sourceRoot() = %q, not the tree holding this package", fromWD)
	}
	t.Chdir(t.TempDir())
	fromSource, err := sourceRoot()
	if err != nil || fromSource != fromWD {
		t.Errorf("sourceRoot() outside the tree = %q, %v; want %q", fromSource, err, fromWD)
	}
	if _, err := resolveIn(Tool{Name: "x", Module: "tools/none"}, fromWD); err == nil {
		t.Error("resolveIn with no module directory: want an error")
	}
}
