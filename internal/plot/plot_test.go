package plot

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
)

// fixture is a finished experiment over a log-scale float and a categorical parameter:
// trial 1 is best, trial 2 was pruned, trial 3 failed.
func fixture(t *testing.T) *api.ExperimentDetail {
	t.Helper()
	data, err := os.ReadFile("testdata/experiment.json")
	if err != nil {
		t.Fatal(err)
	}
	var e api.ExperimentDetail
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// The plot is well-formed SVG with one panel for the objective by trial and one per
// parameter, a dot for every trial with a value in each, and the best ringed.
func TestExperimentSVG(t *testing.T) {
	svg := ExperimentSVG(fixture(t))
	dec := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
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
