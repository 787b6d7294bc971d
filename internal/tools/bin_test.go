package tools

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A tool whose package's last element is not its name (the Temporal server's
// cmd/server) is installed from the file go install writes and cached under its name.
func TestEnsureRenamesBin(t *testing.T) {
	dir := t.TempDir()
	tool := Tool{Name: "fake-server", Package: "example.com/fake/cmd/server", Version: "v1.0.0", Bin: "server"}
	build := func(_ context.Context, tl Tool, gobin string) error {
		return os.WriteFile(filepath.Join(gobin, tl.builtName()), []byte("#!/bin/sh\n"), 0o755)
	}
	got, err := installer{dir: dir, build: build}.ensure(context.Background(), tool)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "fake-server@v1.0.0", "fake-server"); got != want {
		t.Errorf("installed at %s, want %s", got, want)
	}
	if !isFile(got) {
		t.Errorf("%s is not there", got)
	}
}

// The Temporal server and its schema tool are pinned at one version, the one whose
// schema files ModuleDir serves.
func TestTemporalServerToolsArePinnedTogether(t *testing.T) {
	srv, ok1 := Lookup("temporal-server")
	sqlTool, ok2 := Lookup("temporal-sql-tool")
	if !ok1 || !ok2 {
		t.Fatalf("temporal-server %v, temporal-sql-tool %v: want both pinned", ok1, ok2)
	}
	src, ok := sources["go.temporal.io/server"]
	if !ok || srv.Version != sqlTool.Version || src.Version != srv.Version {
		t.Errorf("server %s, sql tool %s, schema source %+v: want one version", srv.Version, sqlTool.Version, src)
	}
	if srv.Bin != "server" || sqlTool.Bin != "sql" {
		t.Errorf("Bin = %q, %q: want the last elements of their packages", srv.Bin, sqlTool.Bin)
	}
}
