package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
)

// MetricPrefix starts a metric line: `dlc:metric step=120 loss=0.41 accuracy=0.87`.
const MetricPrefix = "dlc:metric"

// The JSON spellings of the non-finite values, as in the protobuf JSON mapping of
// float and double: JSON has no number for them.
const (
	JSONNaN         = "NaN"
	JSONInfinity    = "Infinity"
	JSONNegInfinity = "-Infinity"
)

// Metrics maps metric names to values. A trainer that diverges reports NaN or an
// infinity; JSON has no such numbers, so Metrics encodes a non-finite value as one of
// the strings "NaN", "Infinity" and "-Infinity" (and every finite value as a number),
// and decodes both forms.
type Metrics map[string]float64

// MarshalJSON encodes the values, the non-finite ones as strings. The keys are sorted,
// as encoding/json sorts a map's keys.
func (m Metrics) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = json.RawMessage(FormatMetricValue(v))
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes numbers and the strings "NaN", "Infinity" and "-Infinity".
func (m *Metrics) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*m = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Metrics, len(raw))
	for k, r := range raw {
		v, err := decodeMetricValue(r)
		if err != nil {
			return fmt.Errorf("metric %q: %w", k, err)
		}
		out[k] = v
	}
	*m = out
	return nil
}

// JSONSchema describes the encoding: an object whose values are numbers or one of the
// non-finite strings.
func (Metrics) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		AdditionalProperties: &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "number"},
			{Type: "string", Enum: []any{JSONNaN, JSONInfinity, JSONNegInfinity}},
		}},
	}
}

// FormatMetricValue is v as a JSON value: a number, or "NaN", "Infinity" or "-Infinity"
// (quoted).
func FormatMetricValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return `"` + JSONNaN + `"`
	case math.IsInf(v, 1):
		return `"` + JSONInfinity + `"`
	case math.IsInf(v, -1):
		return `"` + JSONNegInfinity + `"`
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// NonFiniteName is "NaN", "Infinity" or "-Infinity" for a non-finite v, else "".
func NonFiniteName(v float64) string {
	switch {
	case math.IsNaN(v):
		return JSONNaN
	case math.IsInf(v, 1):
		return JSONInfinity
	case math.IsInf(v, -1):
		return JSONNegInfinity
	}
	return ""
}

func decodeMetricValue(r json.RawMessage) (float64, error) {
	var x any
	if err := json.Unmarshal(r, &x); err != nil {
		return 0, err
	}
	switch x := x.(type) {
	case float64:
		return x, nil
	case string:
		if v, ok := ParseMetricValue(x); ok && NonFiniteName(v) != "" {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s is neither a number nor one of %q, %q, %q", r, JSONNaN, JSONInfinity, JSONNegInfinity)
}

// ParseMetricValue reads one value of a metric line: a decimal number, or NaN or an
// infinity in any of the spellings strconv.ParseFloat accepts ("nan", "NaN", "inf",
// "+Inf", "-infinity"...). The value may be in double quotes, as the Python library
// writes non-finite values (loss="nan").
func ParseMetricValue(s string) (float64, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// An out-of-range number parses to ±Inf with an ErrRange error: keep it.
		if errors.Is(err, strconv.ErrRange) && math.IsInf(x, 0) {
			return x, true
		}
		return 0, false
	}
	return x, true
}

// ParseMetricLine reads a metric report from a log line: either the key=value form after
// MetricPrefix, or a JSON object with a "dlc_metric" (or "dlc:metric") key holding the
// values. NaN and infinite values are kept (see Metrics); fields whose value is not a
// number are left out. It reports false for other lines and for metric lines without a
// number.
func ParseMetricLine(line string) (Metrics, bool) {
	vals, _ := ParseMetrics(line)
	return vals, len(vals) > 0
}

// ParseMetrics is ParseMetricLine that also names the fields it left out because their
// value is not a number, so that the caller can warn about them. vals is nil when the
// line is not a metric line or has no number.
func ParseMetrics(line string) (vals Metrics, invalid []string) {
	s := strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(s, MetricPrefix); ok {
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return nil, nil
		}
		vals = Metrics{}
		for f := range strings.FieldsSeq(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k == "" {
				continue
			}
			if x, ok := ParseMetricValue(v); ok {
				vals[k] = x
			} else {
				invalid = append(invalid, k)
			}
		}
		return nonEmpty(vals), invalid
	}
	if !strings.HasPrefix(s, "{") {
		return nil, nil
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &doc) != nil {
		return nil, nil
	}
	raw, ok := doc["dlc_metric"]
	if !ok {
		raw, ok = doc[MetricPrefix]
	}
	if !ok {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, nil
	}
	vals = Metrics{}
	for k, r := range m {
		if x, err := decodeMetricValue(r); err == nil {
			vals[k] = x
		} else {
			invalid = append(invalid, k)
		}
	}
	slices.Sort(invalid)
	return nonEmpty(vals), invalid
}

func nonEmpty(m Metrics) Metrics {
	if len(m) == 0 {
		return nil
	}
	return m
}
