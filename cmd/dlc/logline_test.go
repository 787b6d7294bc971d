package main

import (
	"testing"

	"github.com/opendlc/opendlc/events"
)

// A log line names its replica, and its attempt from the second one on, so that a
// restarted gang's lines do not read as repeats of the first attempt's.
func TestFormatLogLineNamesTheAttempt(t *testing.T) {
	for _, tc := range []struct {
		rec  events.LogRecord
		want string
	}{
		{events.LogRecord{Role: "worker", Index: 1, Line: "step 3\n"}, "[worker-1] step 3"},
		{events.LogRecord{Role: "worker", Index: 1, Attempt: 2, Line: "step 3\r\n"}, "[worker-1 attempt 2] step 3"},
		{events.LogRecord{Role: "master", Index: 0, Attempt: 1, Line: ""}, "[master-0 attempt 1] "},
	} {
		if got := formatLogLine(tc.rec); got != tc.want {
			t.Errorf("formatLogLine(%+v) = %q, want %q", tc.rec, got, tc.want)
		}
	}
}
