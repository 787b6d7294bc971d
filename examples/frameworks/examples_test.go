// Package frameworks holds one example TrainingJob per framework; the test keeps them
// valid.
package frameworks

import (
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// Every framework has an example, and every example decodes and validates.
func TestExamplesAreValid(t *testing.T) {
	seen := map[schemas.Framework]bool{}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			seen[schemastest.ReadValid(t, f, schemas.DecodeTrainingJob).Spec.Framework] = true
		})
	}
	for _, fw := range schemas.Frameworks {
		if !seen[fw] {
			t.Errorf("no example for framework %s", fw)
		}
	}
}
