package integration

import (
	"context"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/integration/itest"
)

// recordHistory writes the history of workflowID into workflows/testdata/file with
// -record-histories (itest.RecordHistory).
func recordHistory(t *testing.T, ctx context.Context, workflowID, file string) {
	t.Helper()
	itest.RecordHistory(t, ctx, func() client.Client { return env.temporal }, workflowID, file)
}
