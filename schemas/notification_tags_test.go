package schemas

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNotificationPatternTags checks that the patterns and enums in a NotificationRule's
// jsonschema tags are the constants Validate and the JSON Schema use, each with a
// message in words.
func TestNotificationPatternTags(t *testing.T) {
	checkTagPatterns(t, reflect.TypeFor[NotificationRule](), []string{dnsLabelPattern, eventTypePattern, metricNamePattern, natsSubjectPattern, reasonPattern})

	f, _ := reflect.TypeFor[NotificationMatch]().FieldByName("Phases")
	r := rulesFor(reflect.TypeFor[NotificationMatch](), f.Index[0])
	phases := []string{string(JobPending), string(JobQueued), string(JobHealthCheck), string(JobLaunching),
		string(JobRunning), string(JobRestarting), string(JobSucceeded), string(JobFailed), string(JobStopped),
		"Stopping", "Skipped", "Cancelled"} // experiments' and pipelines' own
	if diff := cmp.Diff(phases, r.enum); diff != "" {
		t.Errorf("phases enum (-want +got):\n%s", diff)
	}
}
