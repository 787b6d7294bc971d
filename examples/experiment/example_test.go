// Package experiment holds the example HPO experiment; the test keeps it valid.
package experiment

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// tune.yaml decodes and validates, and asks for what the example is: 16 trials,
// 4 at a time, TPE, the local backend's custom framework.
func TestTuneExampleIsValid(t *testing.T) {
	e := schemastest.ReadValid(t, "tune.yaml", schemas.DecodeExperiment)
	s := e.Spec
	if s.MaxTrials != 16 || s.Parallelism != 4 || s.Algorithm.Name != schemas.AlgorithmTPE || s.TrialTemplate.Framework != schemas.FrameworkCustom {
		t.Errorf("spec %+v", s)
	}
	job, err := e.TrialJob("tune-logreg-t0", 0, map[string]string{"lr": "0.1", "l2": "0.0001", "batch_size": "32"})
	if err != nil {
		t.Fatal(err)
	}
	if errs := job.Validate(); errs != nil {
		t.Errorf("trial job: %v", errs)
	}
}

// collectors.yaml reads its objective from a CSV file with a file collector, the best
// value of each trial.
func TestCollectorsExampleIsValid(t *testing.T) {
	e := schemastest.ReadValid(t, "collectors.yaml", schemas.DecodeExperiment)
	s := e.Spec
	if s.Objective.Aggregate != schemas.AggregateBest || s.TrialTemplate.Metrics == nil || len(s.TrialTemplate.Metrics.Collectors) != 1 ||
		s.TrialTemplate.Metrics.Collectors[0].File == nil || s.TrialTemplate.Metrics.Collectors[0].File.Format != schemas.MetricFileCSV {
		t.Errorf("spec %+v", s)
	}
	job, err := e.TrialJob("tune-csv-t0", 0, map[string]string{"lr": "0.05"})
	if err != nil {
		t.Fatal(err)
	}
	if errs := job.Validate(); errs != nil {
		t.Errorf("trial job: %v", errs)
	}
}
