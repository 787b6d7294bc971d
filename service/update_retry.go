package service

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Backoff between the attempts of updateWhenReady.
const (
	notReadyFirstBackoff = 100 * time.Millisecond
	notReadyMaxBackoff   = 2 * time.Second
)

// updateWhenReady sends an update and waits for its result into res, asking again
// while Temporal refuses it because the workflow's task is failing or being retried
// (serviceerror.WorkflowNotReady: the server refuses updates from a workflow task's
// third attempt on, until one completes). Such a refusal is transient: a workflow
// task that timed out on a loaded worker, or a worker that restarts, is retried by
// the server, and the update is admitted once a task completes. It gives up when ctx
// ends, answering the last refusal. Any other error is answered at once.
func (t *temporalBase) updateWhenReady(ctx context.Context, o client.UpdateWorkflowOptions, res any) error {
	backoff := notReadyFirstBackoff
	for {
		handle, err := t.tc.UpdateWorkflow(ctx, o)
		if err == nil {
			err = handle.Get(ctx, res)
		}
		if !isNotReady(err) {
			return err
		}
		t.log.Info("workflow task failing; asking the update again", "workflow", o.WorkflowID, "update", o.UpdateName, "in", backoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, notReadyMaxBackoff)
	}
}

// isNotReady reports whether Temporal refused a call because the workflow's task is
// failing (WorkflowNotReady).
func isNotReady(err error) bool {
	var nr *serviceerror.WorkflowNotReady
	return errors.As(err, &nr)
}
