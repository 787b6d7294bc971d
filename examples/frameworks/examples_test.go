// Package frameworks holds one example TrainingJob per framework; the test keeps them
// valid.
package frameworks

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every framework has an example, and every example decodes and validates.
func TestExamplesAreValid(t *testing.T) {
	seen := map[schemas.Framework]bool{}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		job, err := schemas.DecodeTrainingJob(data)
		if err == nil {
			err = job.Validate().Err()
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		seen[job.Spec.Framework] = true
	}
	for _, fw := range schemas.Frameworks {
		if !seen[fw] {
			t.Errorf("no example for framework %s", fw)
		}
	}
}
