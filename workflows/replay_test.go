package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/workers"
)

// TestReplayRecordedHistories replays histories recorded from real runs (see
// integration/history_test.go) against the current workflow code: a change that is not
// behind workflow.GetVersion makes it fail with a non-determinism error.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d recorded histories in testdata, want at least 3 (succeeded, failed, stopped)", len(files))
	}
	r := worker.NewWorkflowReplayer()
	workers.RegisterWorkflows(r)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
