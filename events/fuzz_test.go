package events

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseMetricLine feeds arbitrary log lines to the metric line parser. It never
// panics; the values it returns are never empty and never name a field it reported
// invalid; and values of the key=value form, written back in that form, parse to the
// same values (NaN to NaN).
func FuzzParseMetricLine(f *testing.F) {
	for _, s := range []string{
		MetricPrefix + " loss=0.25 accuracy=0.9 step=10",
		MetricPrefix + " loss=nan acc=\"inf\" x=-Infinity",
		MetricPrefix + " loss=abc ok=1",
		MetricPrefix + "loss=1",
		MetricPrefix + " =1 a= b==2 c=1e400",
		`{"dlc_metric": {"loss": 0.5, "acc": "NaN", "bad": [1]}}`,
		`{"dlc:metric": {"loss": 1}}`,
		`{"dlc_metric": 3}`,
		`{"msg": "no metrics"}`,
		"plain log line", "", "{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		vals, invalid := ParseMetrics(line)
		if vals != nil && len(vals) == 0 {
			t.Fatalf("%q: empty non-nil values", line)
		}
		if got, ok := ParseMetricLine(line); ok != (len(vals) > 0) || len(got) != len(vals) {
			t.Fatalf("%q: ParseMetricLine %v %v, ParseMetrics %v", line, got, ok, vals)
		}
		for _, k := range invalid {
			if _, ok := vals[k]; ok && !strings.HasPrefix(strings.TrimSpace(line), MetricPrefix) {
				t.Fatalf("%q: %q both a value and invalid", line, k)
			}
		}
		if len(vals) == 0 {
			return
		}
		var b strings.Builder
		b.WriteString(MetricPrefix)
		for k, v := range vals {
			if k == "" || strings.ContainsAny(k, "= \t\n\v\f\r\u0085\u00a0") || strings.ContainsFunc(k, isSpace) {
				return // a JSON key the key=value form cannot carry
			}
			b.WriteString(" " + k + "=" + strconv.FormatFloat(v, 'g', -1, 64))
		}
		again, _ := ParseMetrics(b.String())
		if len(again) != len(vals) {
			t.Fatalf("%q: %v written as %q parses to %v", line, vals, b.String(), again)
		}
		for k, v := range vals {
			w, ok := again[k]
			if !ok || !(v == w || math.IsNaN(v) && math.IsNaN(w)) {
				t.Fatalf("%q: %s=%v written as %q parses to %v", line, k, v, b.String(), again)
			}
		}
	})
}

func isSpace(r rune) bool { return strings.TrimSpace(string(r)) == "" }
