package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// plotFixture is a finished experiment over a log-scale float and a categorical
// parameter: trial 1 is best, trial 2 was pruned, trial 3 failed (the plot package's
// fixture).
func plotFixture() *api.ExperimentDetail {
	data, err := os.ReadFile("../../internal/plot/testdata/experiment.json")
	if err != nil {
		panic(err)
	}
	var e api.ExperimentDetail
	if err := json.Unmarshal(data, &e); err != nil {
		panic(err)
	}
	return &e
}

func TestExperimentTrialsSortedByObjective(t *testing.T) {
	e := plotFixture()
	var ids []int
	for _, tr := range sortedTrials(e) {
		ids = append(ids, tr.ID)
	}
	// Completed trials best first, then the pruned one (an intermediate value), then the
	// one without a value.
	if diff := cmp.Diff([]int{1, 0, 2, 3}, ids); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	e.Spec.Spec.Objective.Direction = schemas.Minimize
	ids = ids[:0]
	for _, tr := range sortedTrials(e) {
		ids = append(ids, tr.ID)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 3}, ids); diff != "" {
		t.Errorf("order when minimizing (-want +got):\n%s", diff)
	}
}

func TestPrintExperiment(t *testing.T) {
	out := printed(t, func(w io.Writer) error { return printExperiment(w, plotFixture()) },
		"Phase:       Succeeded",
		"Best:        trial 1, accuracy = 0.9, lr=0.1 bs=32",
		"Trials:      4 of 4 (0 running, 2 completed, 1 pruned, 1 failed), 2 at a time",
		"TRIAL  JOB",
		"ACCURACY",
	)
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		if strings.Contains(l, "tune-t") {
			rows = append(rows, strings.Fields(l)[0])
		}
	}
	if diff := cmp.Diff([]string{"1*", "0", "2", "3"}, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s\n%s", diff, out)
	}
}

func TestFormatAggregate(t *testing.T) {
	for _, tc := range []struct {
		o    schemas.ObjectiveSpec
		want string
	}{
		{schemas.ObjectiveSpec{Metric: "accuracy"}, ""},
		{schemas.ObjectiveSpec{Metric: "accuracy", Aggregate: schemas.AggregateLast}, ""},
		{schemas.ObjectiveSpec{Metric: "accuracy", Aggregate: schemas.AggregateBest}, " (best)"},
		{schemas.ObjectiveSpec{Metric: "score", Metrics: []schemas.WeightedMetric{{Metric: "accuracy", Weight: 1}, {Metric: "latency_ms", Weight: -0.001}}},
			" = 1×accuracy - 0.001×latency_ms (last of each)"},
		{schemas.ObjectiveSpec{Metric: "score", Aggregate: schemas.AggregateMean, Metrics: []schemas.WeightedMetric{{Metric: "loss", Weight: -2}, {Metric: "acc", Weight: 0.5}}},
			" = -2×loss + 0.5×acc (mean of each)"},
	} {
		if got := formatAggregate(tc.o); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}
