package tools

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// errKey matches a structured-log attribute named "err" (or "e"): the project logs every
// error under the one key "error", so a log search for error="..." finds them all.
var errKey = regexp.MustCompile(`"(err|e)",\s*[A-Za-z_][\w.]*\b`)

func TestOneLogKeyForErrors(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if errKey.MatchString(line) {
				t.Errorf(`%s:%d: log the error under "error", not %q`, path, i+1, errKey.FindString(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
