package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// go install -v output: each package line counts, the rest does not.
func TestBuildOutputCountsPackages(t *testing.T) {
	var o buildOutput
	if got := o.status(); got != "downloading and resolving modules" {
		t.Errorf("status before any package: %q", got)
	}
	_, _ = o.Write([]byte("go: downloading example.com/x v1.0.0\nexample.com/x/a\nexample.com/x/"))
	_, _ = o.Write([]byte("b\n# example.com/x/c\n"))
	if got, want := o.status(), "2 packages compiled, now example.com/x/b"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
}

// Ensure says which tool it builds and when it is done, through the context's reporter,
// and nothing for a tool already built.
func TestEnsureReportsTheBuild(t *testing.T) {
	dir := t.TempDir()
	tool := Tool{Name: "fake", Package: "example.com/fake", Version: "v1.0.0"}
	in := installer{dir: dir, build: func(_ context.Context, t Tool, gobin string) error {
		return os.WriteFile(filepath.Join(gobin, t.binaryName()), []byte("#!/bin/sh\n"), 0o755)
	}}
	var lines []string
	ctx := WithProgress(context.Background(), func(l string) { lines = append(lines, l) })
	if _, err := in.ensure(ctx, tool); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "building fake v1.0.0 from source") || !strings.HasPrefix(lines[1], "built fake in ") {
		t.Errorf("reported %q", lines)
	}
	lines = nil
	if _, err := in.ensure(ctx, tool); err != nil || len(lines) != 0 {
		t.Errorf("second ensure: %v, reported %q", err, lines)
	}
}
