package main

import (
	"os"
	"slices"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// TestJobSpecIsValid keeps job.yaml a valid TrainingJob that runs this trainer with flags
// it has.
func TestJobSpecIsValid(t *testing.T) {
	data, err := os.ReadFile("job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job, err := schemas.DecodeTrainingJob(data)
	if err != nil {
		t.Fatalf("decode job.yaml: %v", err)
	}
	if errs := job.Validate(); len(errs) > 0 {
		t.Fatalf("job.yaml is invalid: %v", errs)
	}
	if !slices.Equal(job.Spec.Command, []string{"go", "run", "./examples/trainer"}) {
		t.Errorf("command = %q", job.Spec.Command)
	}
	if _, _, err := parseConfig(job.Spec.Args, envOf(nil), os.Stderr); err != nil {
		t.Errorf("the trainer rejects job.yaml's args %q: %v", job.Spec.Args, err)
	}
}
