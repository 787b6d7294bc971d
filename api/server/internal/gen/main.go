// Command gen writes the API's OpenAPI document, generated from the route table of
// api/server. Run through `go generate ./api/...`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/opendlc/opendlc/api/server"
)

func main() {
	out := flag.String("out", "openapi.json", "file to write")
	flag.Parse()
	doc, err := server.OpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
