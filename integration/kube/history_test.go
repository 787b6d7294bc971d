package kube

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

// recordHistories makes the tests that call recordHistory write their workflow's
// history into workflows/testdata, as ./integration's flag of the same name does, for
// behaviour only the kubernetes backend shows (a pod bound to a node but not running):
//
//	go test ./integration/kube -run TestSlowImagePull -record-histories
var recordHistories = flag.Bool("record-histories", false, "write workflow histories to workflows/testdata")

// recordHistory writes the history of the workflow with id workflowID into
// workflows/testdata/file, with -record-histories; without it, it does nothing.
func recordHistory(t *testing.T, ctx context.Context, workflowID, file string) {
	t.Helper()
	if !*recordHistories {
		return
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort: env.stack.Stack.Temporal.Address, Namespace: env.stack.Stack.Temporal.Namespace,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
	path := filepath.Join("..", "..", "workflows", "testdata", file)
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events in %s", len(h.Events), path)
}
