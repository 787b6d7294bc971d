package kube

import (
	"context"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/integration/itest"
)

// recordHistory writes the history of workflowID into workflows/testdata/file with
// -record-histories (itest.RecordHistory), for behaviour only the kubernetes backend
// shows (a pod bound to a node but not running).
func recordHistory(t *testing.T, ctx context.Context, workflowID, file string) {
	t.Helper()
	var c client.Client
	itest.RecordHistory(t, ctx, func() client.Client {
		var err error
		c, err = client.DialContext(ctx, client.Options{
			HostPort: env.stack.Stack.Temporal.Address, Namespace: env.stack.Stack.Temporal.Namespace,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, workflowID, file)
	if c != nil {
		c.Close()
	}
}
