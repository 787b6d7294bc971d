// Command gen writes the JSON Schema of every event type's data, and of the envelope,
// into events/jsonschema/. Run through `go generate ./events/...`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/events"
)

func main() {
	dir := "jsonschema"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	files, err := events.Schemas()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
