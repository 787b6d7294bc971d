package gobuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree makes a git checkout of a one-file main module.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/hello\n\ngo 1.22\n")
	write(t, root, "cmd/hello/main.go", "package main\n\nfunc main() { println(\"hello\") }\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	return root
}

func write(t *testing.T, root, name, text string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A second ask of an unchanged tree gets the first build without building; a change
// to any file, tracked or not, builds anew, and the new binary runs the new code.
func TestStaticBuildsOncePerTree(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := tree(t)
	first, err := Static(ctx, root, "./cmd/hello", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, first); got != "hello" {
		t.Fatalf("the build printed %q, want hello", got)
	}
	before, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Static(ctx, root, "./cmd/hello", Options{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the unchanged tree was built again: %s (%v), first %s (%v)", again, after.ModTime(), first, before.ModTime())
	}

	// An untracked file changes the tree as much as a tracked one.
	write(t, root, "cmd/hello/other.go", "package main\n\nfunc init() { println(\"other\") }\n")
	changed, err := Static(ctx, root, "./cmd/hello", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Fatalf("a new file did not change the build: %s", changed)
	}
	if got := run(t, changed); got != "other\nhello" {
		t.Errorf("the new build printed %q, want other and hello", got)
	}

	// A copy is a file of its own name that runs the same.
	out := filepath.Join(t.TempDir(), "hello")
	if err := Copy(ctx, root, "./cmd/hello", out, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := run(t, out); got != "other\nhello" {
		t.Errorf("the copy printed %q", got)
	}
}

// Only the newest builds of a program are kept.
func TestPruneKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	var dirs []string
	for i := range keep + 2 {
		d := filepath.Join(dir, "dlc-"+strings.Repeat(string(rune('a'+i)), 16))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		mod := time.Now().Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(d, mod, mod); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	other := filepath.Join(dir, "dlc-image-"+strings.Repeat("z", 16))
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	current := dirs[0] // the oldest by time, but the one just built
	prune(dir, "dlc", current)
	for i, d := range dirs {
		_, err := os.Stat(d)
		kept := err == nil
		want := d == current || i >= len(dirs)-(keep-1)
		if kept != want {
			t.Errorf("%s kept %v, want %v", filepath.Base(d), kept, want)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another program's build was removed: %v", err)
	}
}
