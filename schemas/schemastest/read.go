package schemastest

import (
	"os"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Document is a decoded document of any kind (schemas.Object or one kind's pointer).
type Document interface{ Validate() schemas.ErrorList }

// ReadValid reads the document at path, decodes it with decode (schemas.Decode or one
// kind's Decode function) and validates it. Any failure fails t, naming path; a test
// that reads several files runs each in a subtest so that every file is checked.
func ReadValid[D Document](t testing.TB, path string, decode func([]byte) (D, error)) D {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decode(data)
	if err != nil {
		t.Fatalf("%s: decode:\n%v", path, err)
	}
	if errs := doc.Validate(); len(errs) > 0 {
		t.Fatalf("%s: validate:\n%v", path, errs)
	}
	return doc
}
