package itest

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// recordHistories makes the tests that call RecordHistory write their workflow's
// history into workflows/testdata, where the replay test replays it against the current
// workflow code. Run after a deliberate, versioned workflow change:
//
//	go test ./integration/ -run 'Trainer|Failing|Stop' -record-histories
//	go test ./integration/kube -run TestSlowImagePull -record-histories
var recordHistories = flag.Bool("record-histories", false, "write workflow histories to workflows/testdata")

// RecordHistory writes the history of the workflow with id workflowID (a job's, an
// experiment's, a pipeline's or a schedule's: workflows.JobWorkflowID and the like) into
// workflows/testdata/file, with -record-histories; without it, it does nothing.
// temporal is called only when recording, for the client to read the history with.
func RecordHistory(t *testing.T, ctx context.Context, temporal func() client.Client, workflowID, file string) {
	t.Helper()
	RecordRunHistory(t, ctx, temporal, workflowID, "", file)
}

// RecordRunHistory is RecordHistory for one run of the workflow (runID; "" for the
// latest), for a workflow that continued as new.
func RecordRunHistory(t *testing.T, ctx context.Context, temporal func() client.Client, workflowID, runID, file string) {
	t.Helper()
	if !*recordHistories {
		return
	}
	it := temporal().GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("read history: %v", err)
		}
		h.Events = append(h.Events, ev)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(Root(), "workflows", "testdata", file)
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events in %s", len(h.Events), path)
}
