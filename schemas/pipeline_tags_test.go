package schemas

import (
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPipelineTriggerPatternTags checks that the patterns in the jsonschema tags of a
// Pipeline and a Trigger are the constants Validate uses, each with a message in words.
func TestPipelineTriggerPatternTags(t *testing.T) {
	for name, tc := range map[string]struct {
		typ  reflect.Type
		want []string
	}{
		"Pipeline": {reflect.TypeFor[Pipeline](), []string{checkpointURIPattern, dnsLabelPattern, envNamePattern}},
		"Trigger":  {reflect.TypeFor[Trigger](), []string{checkpointURIPattern, dnsLabelPattern, envNamePattern, natsSubjectPattern}},
	} {
		t.Run(name, func(t *testing.T) {
			seen := map[reflect.Type]bool{}
			structTypes(tc.typ, seen)
			var patterns []string
			for st := range seen {
				for i := range st.NumField() {
					if p := rulesFor(st, i).pattern; p != "" && !slices.Contains(patterns, p) {
						patterns = append(patterns, p)
					}
				}
			}
			slices.Sort(patterns)
			slices.Sort(tc.want)
			if diff := cmp.Diff(tc.want, patterns); diff != "" {
				t.Errorf("patterns in jsonschema tags (-want +got):\n%s", diff)
			}
			for _, p := range patterns {
				if _, ok := patternMessages[p]; !ok {
					t.Errorf("pattern %q has no entry in patternMessages", p)
				}
			}
		})
	}
}
