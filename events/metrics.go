package events

import (
	"encoding/json"
	"strconv"
	"strings"
)

// MetricPrefix starts a metric line: `dlc:metric step=120 loss=0.41 accuracy=0.87`.
const MetricPrefix = "dlc:metric"

// ParseMetricLine reads a metric report from a log line: either the key=value form after
// MetricPrefix, or a JSON object with a "dlc_metric" (or "dlc:metric") key holding the
// values. Values that are not numbers are ignored. It reports false for other lines.
func ParseMetricLine(line string) (map[string]float64, bool) {
	s := strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(s, MetricPrefix); ok {
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return nil, false
		}
		vals := map[string]float64{}
		for f := range strings.FieldsSeq(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k == "" {
				continue
			}
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				vals[k] = x
			}
		}
		return vals, len(vals) > 0
	}
	if strings.HasPrefix(s, "{") {
		var doc map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &doc) != nil {
			return nil, false
		}
		raw, ok := doc["dlc_metric"]
		if !ok {
			raw, ok = doc[MetricPrefix]
		}
		if !ok {
			return nil, false
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			return nil, false
		}
		vals := map[string]float64{}
		for k, v := range m {
			if x, ok := v.(float64); ok {
				vals[k] = x
			}
		}
		return vals, len(vals) > 0
	}
	return nil, false
}
