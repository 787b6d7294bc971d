package activities

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
)

// workflowGone reports whether ctx was cancelled because the server no longer knows the
// activity's workflow: the SDK cancels an activity whose heartbeat the server answers
// with NotFound, which it does once the workflow has completed. An experiment completes
// while the metrics watch of its last trials may still be pending, so this is how that
// watch normally ends.
func workflowGone(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	_, ok := errors.AsType[*serviceerror.NotFound](context.Cause(ctx))
	return ok
}

// watchEnded ends a trial-metrics watch whose workflow has completed: nobody waits for
// its result any more, so it logs that at DEBUG and returns what it read, without an
// error (which the SDK would log as a failed activity).
func watchEnded(ctx context.Context, in WatchTrialMetricsInput, res WatchTrialMetricsResult) (WatchTrialMetricsResult, error) {
	activity.GetLogger(ctx).Debug("trial metrics watch ends: its workflow has completed",
		"job", in.Job, "lastSeq", res.LastSeq, "cause", context.Cause(ctx))
	return res, nil
}
