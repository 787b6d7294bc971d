package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// paretoFixture has trials 0 and 1 on the front of (maximise accuracy, minimise loss),
// trial 2 dominated by both, trial 3 pruned and trial 4 failed.
func paretoFixture(objectives ...schemas.ObjectiveSpec) *api.ExperimentDetail {
	lr := 0.01
	trial := func(id int, phase schemas.TrialPhase, acc, loss, lat float64) schemas.TrialStatus {
		return schemas.TrialStatus{ID: id, Phase: phase, Params: map[string]any{"lr": lr}, Value: new(acc),
			Values: map[string]float64{"accuracy": acc, "loss": loss, "latency": lat}}
	}
	e := &api.ExperimentDetail{}
	e.Spec.Metadata = schemas.ObjectMeta{Name: "pareto", Workspace: "ml"}
	e.Spec.Spec = schemas.ExperimentSpec{
		SearchSpace: []schemas.ParameterSpec{{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.001), Max: new(1.0), Log: true}},
		Objectives:  objectives,
	}
	e.Status = schemas.ExperimentStatus{Phase: schemas.ExperimentSucceeded, ParetoFront: []int{1, 0}, Trials: []schemas.TrialStatus{
		trial(0, schemas.TrialCompleted, 0.8, 0.2, 5),
		trial(1, schemas.TrialCompleted, 0.9, 0.4, 9),
		trial(2, schemas.TrialCompleted, 0.7, 0.5, 7),
		trial(3, schemas.TrialPruned, 0.95, 0.1, 1),
		{ID: 4, Phase: schemas.TrialFailed},
	}}
	return e
}

var accLoss = []schemas.ObjectiveSpec{{Metric: "accuracy", Direction: schemas.Maximize}, {Metric: "loss", Direction: schemas.Minimize}}

// classes counts the SVG's elements by class and checks it is well-formed XML.
func classes(t *testing.T, svg []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return counts
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
}

// With two objectives the plot gains a Pareto panel: the completed trials by accuracy
// and loss, the front's two in red, joined by the staircase that bounds what they
// dominate (for maximised accuracy: down from the less accurate one, then across).
func TestParetoPanel(t *testing.T) {
	svg := ExperimentSVG(paretoFixture(accLoss...))
	counts := classes(t, svg)
	for class, want := range map[string]int{"panel": 3, "pareto front": 2, "pareto dominated": 1, "pareto-line": 1} {
		if counts[class] != want {
			t.Errorf("%d elements of class %q, want %d", counts[class], class, want)
		}
	}
	s := string(svg)
	for _, want := range []string{"Pareto front: accuracy (maximize) vs loss (minimize)", "trial 0: accuracy = 0.8, loss = 0.2 (Pareto front)",
		"trial 1: accuracy = 0.9, loss = 0.4 (Pareto front)", "trial 2: accuracy = 0.7, loss = 0.5</title>"} {
		if !strings.Contains(s, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if strings.Contains(s, "trial 3: accuracy") {
		t.Error("the pruned trial is on the Pareto panel")
	}
	m := regexp.MustCompile(`class="pareto-line"[^>]*points="([^"]*)"`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal("no staircase")
	}
	var pts [][2]float64
	for p := range strings.FieldsSeq(m[1]) {
		var x, y float64
		if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
			t.Fatal(err)
		}
		pts = append(pts, [2]float64{x, y})
	}
	// Trial 0 (accuracy 0.8), the corner at (0.8, 0.4), trial 1 (0.9, 0.4).
	if len(pts) != 3 || pts[1][0] != pts[0][0] || pts[1][1] != pts[2][1] || !(pts[2][0] > pts[0][0]) || !(pts[2][1] < pts[0][1]) {
		t.Errorf("staircase %v: want trial 0, the corner below it level with trial 1, then trial 1 to its right and higher (larger loss)", pts)
	}
}

// With three objectives the panel shows the first two, says so, and draws no staircase
// (the front is over all three); one objective has no Pareto panel.
func TestParetoPanelThreeAndOneObjectives(t *testing.T) {
	three := append(append([]schemas.ObjectiveSpec{}, accLoss...), schemas.ObjectiveSpec{Metric: "latency", Direction: schemas.Minimize})
	svg := ExperimentSVG(paretoFixture(three...))
	counts := classes(t, svg)
	got := map[string]int{"panel": counts["panel"], "pareto front": counts["pareto front"], "pareto-line": counts["pareto-line"]}
	if diff := cmp.Diff(map[string]int{"panel": 3, "pareto front": 2, "pareto-line": 0}, got); diff != "" {
		t.Errorf("three objectives (-want +got):\n%s", diff)
	}
	if !bytes.Contains(svg, []byte("vs loss (minimize), first 2 of 3")) {
		t.Error("the title does not say only the first 2 of 3 objectives are drawn")
	}
	one := paretoFixture()
	one.Spec.Spec.Objective = accLoss[0]
	if c := classes(t, ExperimentSVG(one)); c["pareto front"] != 0 || c["panel"] != 2 {
		t.Errorf("one objective: %v, want 2 panels and no Pareto front", c)
	}
}
