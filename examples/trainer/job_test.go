package main

import (
	"os"
	"slices"
	"testing"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// TestJobSpecIsValid keeps job.yaml a valid TrainingJob that runs this trainer with flags
// it has.
func TestJobSpecIsValid(t *testing.T) {
	job := schemastest.ReadValid(t, "job.yaml", schemas.DecodeTrainingJob)
	if !slices.Equal(job.Spec.Command, []string{"go", "run", "./examples/trainer"}) {
		t.Errorf("command = %q", job.Spec.Command)
	}
	if _, _, err := parseConfig(job.Spec.Args, envOf(nil), os.Stderr); err != nil {
		t.Errorf("the trainer rejects job.yaml's args %q: %v", job.Spec.Args, err)
	}
}
