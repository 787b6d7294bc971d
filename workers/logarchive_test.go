package workers

import (
	"slices"
	"testing"

	"github.com/opendlc/opendlc/activities"
)

func TestRegisteredLogArchiveActivity(t *testing.T) {
	var n names
	RegisterLogArchiveActivities(&n, &activities.LogArchiveActivities{})
	if want := []string{"ArchiveLogs"}; !slices.Equal(n.activities, want) {
		t.Errorf("log archive activities registered as %q, want %q", n.activities, want)
	}
}
