package schemas

import (
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNotificationPatternTags checks that the patterns and enums in a NotificationRule's
// jsonschema tags are the constants Validate and the JSON Schema use, each with a
// message in words.
func TestNotificationPatternTags(t *testing.T) {
	seen := map[reflect.Type]bool{}
	structTypes(reflect.TypeFor[NotificationRule](), seen)
	var patterns []string
	for st := range seen {
		for i := range st.NumField() {
			if p := rulesFor(st, i).pattern; p != "" && !slices.Contains(patterns, p) {
				patterns = append(patterns, p)
			}
		}
	}
	slices.Sort(patterns)
	want := []string{dnsLabelPattern, eventTypePattern, natsSubjectPattern}
	slices.Sort(want)
	if diff := cmp.Diff(want, patterns); diff != "" {
		t.Errorf("patterns in jsonschema tags (-want +got):\n%s", diff)
	}
	for _, p := range patterns {
		if _, ok := patternMessages[p]; !ok {
			t.Errorf("pattern %q has no entry in patternMessages", p)
		}
	}

	f, _ := reflect.TypeFor[NotificationMatch]().FieldByName("Phases")
	r := rulesFor(reflect.TypeFor[NotificationMatch](), f.Index[0])
	phases := []string{string(JobPending), string(JobQueued), string(JobHealthCheck), string(JobLaunching),
		string(JobRunning), string(JobRestarting), string(JobSucceeded), string(JobFailed), string(JobStopped)}
	if diff := cmp.Diff(phases, r.enum); diff != "" {
		t.Errorf("phases enum (-want +got):\n%s", diff)
	}
}
