package service

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRetryNamesCountOn(t *testing.T) {
	for run, want := range map[string][]string{
		"nightly":          {"nightly-retry-1", "nightly-retry-2"},
		"nightly-retry-3":  {"nightly-retry-4", "nightly-retry-5"},
		"a-retry-x":        {"a-retry-x-retry-1", "a-retry-x-retry-2"},
		"nightly-retry-09": {"nightly-retry-10", "nightly-retry-11"},
	} {
		got := retryNames(run)
		if len(got) != maxRetryNames {
			t.Errorf("retryNames(%s): %d names, want %d", run, len(got), maxRetryNames)
		}
		if diff := cmp.Diff(want, got[:2]); diff != "" {
			t.Errorf("retryNames(%s) (-want +got):\n%s", run, diff)
		}
	}
}
