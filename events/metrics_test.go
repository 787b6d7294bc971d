package events_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/events"
)

// sameValue is == that also holds for two NaNs.
func sameValue(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// A diverged trainer's NaN and infinities are metric values like any other, in every
// spelling strconv.ParseFloat knows and quoted as the Python library writes them; a value
// that is not a number is left out and named.
func TestParseMetricsNonFinite(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		line        string
		want        map[string]float64
		wantInvalid []string
	}{
		{"dlc:metric step=1 loss=nan", map[string]float64{"step": 1, "loss": nan}, nil},
		{"dlc:metric step=2 loss=NaN acc=inf grad=-Inf", map[string]float64{"step": 2, "loss": nan, "acc": inf, "grad": -inf}, nil},
		{"dlc:metric step=3 loss=Infinity x=+infinity y=-infinity", map[string]float64{"step": 3, "loss": inf, "x": inf, "y": -inf}, nil},
		{`dlc:metric step=4 loss="nan" acc="inf" g="-inf"`, map[string]float64{"step": 4, "loss": nan, "acc": inf, "g": -inf}, nil},
		{"dlc:metric step=5 big=1e999", map[string]float64{"step": 5, "big": inf}, nil},
		{"dlc:metric step=6 loss=abc note=x", map[string]float64{"step": 6}, []string{"loss", "note"}},
		{"dlc:metric loss=abc", nil, []string{"loss"}},
		{`{"dlc_metric": {"loss": "NaN", "acc": "Infinity", "g": "-Infinity", "step": 7}}`, map[string]float64{"step": 7, "loss": nan, "acc": inf, "g": -inf}, nil},
		{`{"dlc_metric": {"loss": 0.5, "note": "x", "ok": true}}`, map[string]float64{"loss": 0.5}, []string{"note", "ok"}},
	}
	for _, tc := range tests {
		got, invalid := events.ParseMetrics(tc.line)
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.line, got, tc.want)
		}
		for k, v := range tc.want {
			if g, ok := got[k]; !ok || !sameValue(g, v) {
				t.Errorf("%q: %s = %v (%v), want %v", tc.line, k, g, ok, v)
			}
		}
		if !slices.Equal(invalid, tc.wantInvalid) {
			t.Errorf("%q: invalid %v, want %v", tc.line, invalid, tc.wantInvalid)
		}
		if _, ok := events.ParseMetricLine(tc.line); ok != (len(tc.want) > 0) {
			t.Errorf("%q: ParseMetricLine ok = %v", tc.line, ok)
		}
	}
}

// Metrics encodes NaN and the infinities as the strings "NaN", "Infinity" and
// "-Infinity" (encoding/json refuses them as numbers) and reads them back; a metric
// event with such values marshals and round-trips.
func TestMetricsJSONRoundTrip(t *testing.T) {
	m := events.Metrics{"loss": math.NaN(), "up": math.Inf(1), "down": math.Inf(-1), "acc": 0.875, "step": 12}
	if _, err := json.Marshal(map[string]float64(m)); err == nil {
		t.Fatal("encoding/json encoded NaN as a number: the test no longer shows the fault")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"acc":0.875,"down":"-Infinity","loss":"NaN","step":12,"up":"Infinity"}`
	if string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
	ev, err := events.New("id", events.TypeJobMetric, "ws", "src", "job", time.Unix(0, 0),
		events.MetricData{Job: "job", UID: "u", Replica: "r", Seq: 3, Values: m})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var back events.Event
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	var d events.MetricData
	if err := json.Unmarshal(back.Data, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Values) != len(m) {
		t.Fatalf("round trip: %v, want %v", d.Values, m)
	}
	for k, v := range m {
		if !sameValue(d.Values[k], v) {
			t.Errorf("round trip: %s = %v, want %v", k, d.Values[k], v)
		}
	}
	var nilM events.Metrics
	if b, _ := json.Marshal(struct {
		M events.Metrics `json:"m,omitempty"`
	}{nilM}); string(b) != "{}" {
		t.Errorf("empty metrics encode as %s", b)
	}
	for _, bad := range []string{`{"x":"abc"}`, `{"x":true}`, `{"x":"0.5"}`, `[1]`} {
		var m events.Metrics
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("%s decoded to %v, want an error", bad, m)
		} else if strings.HasPrefix(bad, "{") && !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%s: error %q does not name the metric", bad, err)
		}
	}
}
