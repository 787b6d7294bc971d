package workers

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/workflows"
)

// startNodeHealth starts the node self-healing workflow unless it runs already, when
// the backend checks nodes (the kubernetes backend; not the local one). Every such
// worker asks at start, so the one workflow survives any worker's loss; starting one
// that exists is not an error. A failure is logged, not fatal: the worker still runs
// jobs, and the next worker start tries again.
func startNodeHealth(ctx context.Context, tc client.Client, cfg Config) {
	if _, ok := cfg.Backend.(backend.NodeChecker); !ok {
		return
	}
	start := workflows.NodeHealthStart()
	_, err := tc.ExecuteWorkflow(ctx, start.ClientOptions(cfg.TaskQueue), start.WorkflowType, start.Input)
	if err != nil {
		cfg.Logger.Error("workers: could not start the node self-healing workflow", "id", workflows.NodeHealthWorkflowID, "error", err)
		return
	}
	cfg.Logger.Info("workers: node self-healing workflow running", "id", workflows.NodeHealthWorkflowID)
}
