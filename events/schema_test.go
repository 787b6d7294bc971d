package events_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/events"
)

// The checked-in schemas are what the types generate.
func TestJSONSchemasUpToDate(t *testing.T) {
	files, err := events.Schemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(events.Types)+2 {
		t.Fatalf("%d schema files for %d types", len(files), len(events.Types))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("jsonschema", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("events/jsonschema/%s is stale or missing (%v): run go generate ./events/...", name, err)
		}
	}
}

func TestParseMetricLine(t *testing.T) {
	for line, want := range map[string]map[string]float64{
		"dlc:metric step=120 loss=0.41 accuracy=0.87": {"step": 120, "loss": 0.41, "accuracy": 0.87},
		`{"dlc_metric": {"loss": 0.5, "note": "x"}}`:  {"loss": 0.5},
		"  dlc:metric\tepoch=3 bad=x":                 {"epoch": 3},
		"dlc:metrics step=1":                          nil,
		"plain log line":                              nil,
		`{"other": 1}`:                                nil,
	} {
		got, ok := events.ParseMetricLine(line)
		if (want == nil) == ok {
			t.Errorf("%q: ok = %v", line, ok)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", line, k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%q: got %v, want %v", line, got, want)
		}
	}
}

// A node's name is one subject token, whatever dots it has.
func TestNodeHealthSubjectIsOneToken(t *testing.T) {
	if got, want := events.NodeHealthSubject("ip-10-0-0-1.ec2.internal"), "dlc.system.node.ip-10-0-0-1_ec2_internal.health"; got != want {
		t.Errorf("NodeHealthSubject = %q, want %q", got, want)
	}
}
