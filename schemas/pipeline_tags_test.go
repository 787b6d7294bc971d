package schemas

import (
	"reflect"
	"testing"
)

// TestPipelineTriggerPatternTags checks that the patterns in the jsonschema tags of a
// Pipeline and a Trigger are the constants Validate uses, each with a message in words.
func TestPipelineTriggerPatternTags(t *testing.T) {
	for name, tc := range map[string]struct {
		typ  reflect.Type
		want []string
	}{
		"Pipeline": {reflect.TypeFor[Pipeline](), []string{checkpointURIPattern, dnsLabelPattern, envNamePattern, metricNamePattern, paramNamePattern}},
		"Trigger":  {reflect.TypeFor[Trigger](), []string{checkpointURIPattern, dnsLabelPattern, envNamePattern, natsSubjectPattern, metricNamePattern, paramNamePattern, eventTypePattern, reasonPattern}},
	} {
		t.Run(name, func(t *testing.T) {
			checkTagPatterns(t, tc.typ, tc.want)
		})
	}
}
