// Command gen-jsonschema writes the JSON Schema of every document kind into a directory.
// It is run by `go generate ./schemas/...`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/opendlc/opendlc/schemas/internal/jsonschemagen"
)

func main() {
	src := flag.String("src", ".", "directory of package schemas, for doc comments")
	out := flag.String("out", "jsonschema", "directory to write the schemas to")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen-jsonschema:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	files, err := jsonschemagen.Generate(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(out, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
