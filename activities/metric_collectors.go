package activities

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// This file reads metrics as the training code writes them (spec.metrics.collectors):
// regular expressions over output lines, and JSON lines, CSV and Hugging Face
// trainer_state.json files. metric_files.go tails the files while a replica runs.

// lineParser reads the metrics of one output line: OpenDLC's metric line, and the named
// groups of the stdout collectors' regular expressions.
type lineParser struct {
	regexes []*regexp.Regexp
}

// newLineParser compiles the stdout collectors' regular expressions.
func newLineParser(patterns []string) (*lineParser, error) {
	p := &lineParser{}
	for _, s := range patterns {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("metric regex %q: %w", s, err)
		}
		p.regexes = append(p.regexes, re)
	}
	return p, nil
}

// parse returns the metrics of line (nil if none) and the fields left out because their
// value is not a number. A metric line (`dlc:metric ...`) is read as such; every other
// line is matched against each regular expression, every match of each, and each named
// group that matched a number is a metric (the group "step" included).
func (p *lineParser) parse(line string) (events.Metrics, []string) {
	vals, invalid := events.ParseMetrics(line)
	if vals != nil || len(invalid) > 0 || p == nil || len(p.regexes) == 0 {
		return vals, invalid
	}
	for _, re := range p.regexes {
		names := re.SubexpNames()
		for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
			for g := 1; g < len(names); g++ {
				if names[g] == "" || m[2*g] < 0 {
					continue
				}
				s := line[m[2*g]:m[2*g+1]]
				if x, ok := events.ParseMetricValue(s); ok {
					if vals == nil {
						vals = events.Metrics{}
					}
					vals[names[g]] = x
				} else if !slices.Contains(invalid, names[g]) {
					invalid = append(invalid, names[g])
				}
			}
		}
	}
	return vals, invalid
}

// metricRow is one row of a metrics file: its number (from 1, counting every row the
// file holds, with or without numbers, so the same row has the same number in every
// read) and its values (nil for a row without a number).
type metricRow struct {
	N      int64
	Values events.Metrics
}

// errIncomplete says a whole-file format (trainer_state.json) is being rewritten: read
// it again later.
var errIncomplete = errors.New("metrics file incomplete")

// parseMetricFile reads every row of data in format. Unless final, a last line without
// its newline is left out (it is still being written). Rows that cannot be read are
// numbered but have no values; bad names the first such row's problem.
func parseMetricFile(format schemas.MetricFileFormat, data []byte, final bool) (rows []metricRow, bad error, err error) {
	switch format {
	case schemas.MetricFileJSONL:
		rows, bad = parseJSONLines(completeLines(data, final))
		return rows, bad, nil
	case schemas.MetricFileCSV:
		rows, bad = parseCSV(completeLines(data, final))
		return rows, bad, nil
	case schemas.MetricFileHFTrainerState:
		rows, err = parseTrainerState(data)
		return rows, nil, err
	}
	return nil, nil, fmt.Errorf("unknown metrics file format %q", format)
}

// completeLines is data up to its last newline, or all of it when final.
func completeLines(data []byte, final bool) []byte {
	if final {
		return data
	}
	i := bytes.LastIndexByte(data, '\n')
	return data[:i+1]
}

// parseJSONLines reads one JSON object per non-blank line: its numeric fields (and the
// strings "NaN", "Infinity", "-Infinity") are the row's metrics.
func parseJSONLines(data []byte) ([]metricRow, error) {
	var (
		rows []metricRow
		bad  error
	)
	n := int64(0)
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		n++
		vals, err := jsonObjectMetrics(line)
		if err != nil && bad == nil {
			bad = fmt.Errorf("row %d: %w", n, err)
		}
		rows = append(rows, metricRow{N: n, Values: vals})
	}
	return rows, bad
}

// nonFiniteJSON matches the bare NaN and infinities Python's json module writes (it is
// not JSON); they are quoted before a second try.
var nonFiniteJSON = regexp.MustCompile(`([:\[,]\s*)(-?Infinity|NaN)(\s*[,}\]])`)

// unmarshalLenient is json.Unmarshal that also reads Python's NaN, Infinity and
// -Infinity.
func unmarshalLenient(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); !ok {
		return err
	}
	// Twice: adjacent values share a delimiter, so one pass quotes every other one.
	fixed := nonFiniteJSON.ReplaceAll(data, []byte(`$1"$2"$3`))
	fixed = nonFiniteJSON.ReplaceAll(fixed, []byte(`$1"$2"$3`))
	if bytes.Equal(fixed, data) || json.Unmarshal(fixed, v) != nil {
		return err
	}
	return nil
}

// jsonObjectMetrics is the metrics of one JSON object: its numeric top-level fields.
func jsonObjectMetrics(data []byte) (events.Metrics, error) {
	var obj map[string]json.RawMessage
	if err := unmarshalLenient(data, &obj); err != nil {
		return nil, err
	}
	return numericFields(obj), nil
}

// numericFields keeps the fields that are numbers or non-finite strings.
func numericFields(obj map[string]json.RawMessage) events.Metrics {
	var vals events.Metrics
	for k, raw := range obj {
		var x any
		if json.Unmarshal(raw, &x) != nil {
			continue
		}
		var v float64
		switch x := x.(type) {
		case float64:
			v = x
		case string:
			f, ok := events.ParseMetricValue(x)
			if !ok || events.NonFiniteName(f) == "" {
				continue
			}
			v = f
		default:
			continue
		}
		if vals == nil {
			vals = events.Metrics{}
		}
		vals[k] = v
	}
	return withStep(vals)
}

// parseCSV reads a CSV file with a header row: each data row's non-empty cells that are
// numbers are its metrics, named by their column. Lightning's CSVLogger leaves the cells
// of metrics logged at other steps empty; Keras' CSVLogger numbers its rows by epoch.
func parseCSV(data []byte) ([]metricRow, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	header = slices.Clone(header)
	for i, h := range header {
		header[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
	}
	var (
		rows []metricRow
		bad  error
	)
	n := int64(0)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, bad
		}
		n++
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("row %d: %w", n, err)
			}
			rows = append(rows, metricRow{N: n})
			continue
		}
		var vals events.Metrics
		for i, cell := range rec {
			cell = strings.TrimSpace(cell)
			if i >= len(header) || header[i] == "" || cell == "" {
				continue
			}
			if x, ok := events.ParseMetricValue(cell); ok {
				if vals == nil {
					vals = events.Metrics{}
				}
				vals[header[i]] = x
			}
		}
		rows = append(rows, metricRow{N: n, Values: withStep(vals)})
	}
}

// parseTrainerState reads Hugging Face Trainer's trainer_state.json: each entry of its
// log_history (training logs, evaluations, the closing summary) is a row whose numeric
// fields are its metrics; its step field numbers it. The Trainer rewrites the whole
// file at each save: a file that does not parse is being written (errIncomplete).
func parseTrainerState(data []byte) ([]metricRow, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var st struct {
		LogHistory []map[string]json.RawMessage `json:"log_history"`
	}
	if err := unmarshalLenient(data, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", errIncomplete, err)
	}
	rows := make([]metricRow, 0, len(st.LogHistory))
	for i, e := range st.LogHistory {
		rows = append(rows, metricRow{N: int64(i + 1), Values: numericFields(e)})
	}
	return rows, nil
}

// withStep numbers a row that has an epoch but no step by its epoch (Keras' CSVLogger
// writes no step).
func withStep(vals events.Metrics) events.Metrics {
	if vals == nil {
		return nil
	}
	if _, ok := vals[schemas.StepGroup]; !ok {
		if e, ok := vals["epoch"]; ok {
			vals[schemas.StepGroup] = e
		}
	}
	return vals
}
