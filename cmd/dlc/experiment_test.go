package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

func expVal(v float64) *float64 { return &v }

// plotFixture is a finished experiment over a log-scale float and a categorical
// parameter: trial 1 is best, trial 2 was pruned, trial 3 failed.
func plotFixture() *api.ExperimentDetail {
	lo, hi := 0.001, 1.0
	best := 1
	return &api.ExperimentDetail{
		UID: "u1",
		Spec: schemas.Experiment{
			Metadata: schemas.ObjectMeta{Name: "tune", Workspace: "ml"},
			Spec: schemas.ExperimentSpec{
				SearchSpace: []schemas.ParameterSpec{
					{Name: "lr", Type: schemas.ParameterFloat, Min: &lo, Max: &hi, Log: true},
					{Name: "bs", Type: schemas.ParameterCategorical, Values: []schemas.CategoricalValue{"16", "32", "adam<&>"}},
				},
				Objective:   schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize},
				Algorithm:   schemas.AlgorithmSpec{Name: schemas.AlgorithmTPE},
				MaxTrials:   4,
				Parallelism: 2,
			},
		},
		Status: schemas.ExperimentStatus{
			Phase: schemas.ExperimentSucceeded, Seed: 9, MaxTrials: 4, Completed: 2, Pruned: 1, Failed: 1,
			BestTrial: &best, BestValue: expVal(0.9), BestParams: map[string]any{"lr": 0.1, "bs": 32.0},
			Trials: []schemas.TrialStatus{
				{ID: 0, Job: "tune-t0", Phase: schemas.TrialCompleted, Value: expVal(0.8), Step: 5, Params: map[string]any{"lr": 0.01, "bs": 16.0}},
				{ID: 1, Job: "tune-t1", Phase: schemas.TrialCompleted, Value: expVal(0.9), Step: 5, Params: map[string]any{"lr": 0.1, "bs": 32.0}},
				{ID: 2, Job: "tune-t2", Phase: schemas.TrialPruned, Value: expVal(0.95), Step: 1, Params: map[string]any{"lr": 0.5, "bs": "adam<&>"},
					Message: "stopped early at step 1"},
				{ID: 3, Job: "tune-t3-r1", Phase: schemas.TrialFailed, Attempts: 2, Params: map[string]any{"lr": 0.002, "bs": 16.0},
					Message: "job tune-t3-r1 ended Failed"},
			},
		},
	}
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
	var b bytes.Buffer
	if err := printExperiment(&b, plotFixture()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Phase:       Succeeded",
		"Best:        trial 1, accuracy = 0.9, lr=0.1 bs=32",
		"Trials:      4 of 4 (0 running, 2 completed, 1 pruned, 1 failed), 2 at a time",
		"TRIAL  JOB",
		"ACCURACY",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
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

// The plot is well-formed SVG with one panel for the objective by trial and one per
// parameter, a dot for every trial with a value in each, and the best ringed.
func TestPlotExperimentSVG(t *testing.T) {
	svg := plotExperimentSVG(plotFixture())
	dec := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "class" {
					counts[a.Value]++
				}
			}
		}
	}
	want := map[string]int{
		"panel":           3, // by trial, by lr, by bs
		"trial completed": 6, // 2 completed trials in 3 panels
		"trial pruned":    3,
		"best-trial":      3,
		"best":            1, // the best-so-far line
		"legend":          1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("elements by class (-want +got):\n%s", diff)
	}
	for _, label := range []string{"accuracy by lr", "accuracy by bs", "adam&lt;&amp;&gt;", ">0.001<", ">1<"} {
		if !bytes.Contains(svg, []byte(label)) {
			t.Errorf("plot lacks %q", label)
		}
	}
}

func TestNiceAxes(t *testing.T) {
	a := newAxis([]float64{0.81, 0.93}, false)
	if a.lo > 0.81 || a.hi < 0.93 || len(a.ticks) < 3 {
		t.Errorf("linear axis %+v", a)
	}
	l := newAxis([]float64{0.001, 0.3}, true)
	if diff := cmp.Diff([]float64{0.001, 0.01, 0.1}, l.ticks); diff != "" {
		t.Errorf("log ticks (-want +got):\n%s", diff)
	}
	if f := l.frac(0.001); f != 0 {
		t.Errorf("frac(min) = %v", f)
	}
	one := newAxis([]float64{2, 2}, false)
	if one.lo >= 2 || one.hi <= 2 {
		t.Errorf("single-value axis %+v", one)
	}
}
