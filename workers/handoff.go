package workers

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/workflows"
)

// A worker that stops on purpose (SIGTERM: a rolling upgrade, a scale-down, `dlc worker`
// ended by hand) hands its job-long activities to the other workers at once, instead of
// holding them until their heartbeat timeout (a minute by default) as a worker that died
// does.
//
// When the worker starts to stop, the SDK closes the activities' worker-stop channel and
// then waits up to stopTimeout for the running activities to return and report. The
// handoff interceptor cancels the context of each activity named in handoffActivities
// as soon as that channel closes and reports its end as a retryable failure of type
// ErrTypeWorkerStopping; Temporal schedules the activity's next attempt after its retry
// policy's first interval (1 s), and a worker that still polls takes it. These
// activities only wait and follow (a gang, a log stream, a trial's metrics, a run):
// their next attempt takes up where the last left off, as after a worker's death, so
// nothing is lost or done twice. The other, short activities are left to finish within
// stopTimeout; one still running then is cancelled by the SDK and retried after its
// (short) heartbeat timeout.

// ErrTypeWorkerStopping is the failure type of an activity handed off by a stopping
// worker.
const ErrTypeWorkerStopping = "WorkerStopping"

// stopTimeout is the worker's WorkerStopTimeout: how long a stopping worker waits for
// its running activities (the short ones; the job-long ones return at once). It stays
// well within Kubernetes' default termination grace period of 30 s.
const stopTimeout = 15 * time.Second

// handoffActivities are the activities that last as long as a job, trial or run.
var handoffActivities = map[string]bool{
	workflows.ActivityWatchGang:         true,
	workflows.ActivityForwardLogs:       true,
	workflows.ActivityWatchTrialMetrics: true,
	workflows.ActivityWaitScheduledJob:  true,
	workflows.ActivityStopScheduledJob:  true,
}

// errWorkerStopping is the cause a handed-off activity's context is cancelled with.
var errWorkerStopping = errors.New("the worker is stopping")

type handoffInterceptor struct {
	interceptor.WorkerInterceptorBase
}

func (*handoffInterceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	h := &handoffInbound{}
	h.Next = next
	return h
}

type handoffInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (h *handoffInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if !handoffActivities[activity.GetInfo(ctx).ActivityType.Name] {
		return h.Next.ExecuteActivity(ctx, in)
	}
	stopping := activity.GetWorkerStopChannel(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-stopping:
			cancel(errWorkerStopping)
		case <-ctx.Done():
		}
	}()
	res, err := h.Next.ExecuteActivity(ctx, in)
	if err != nil && errors.Is(context.Cause(ctx), errWorkerStopping) {
		return nil, temporal.NewApplicationErrorWithCause("the worker is stopping: the activity goes on on another worker", ErrTypeWorkerStopping, err)
	}
	return res, err
}
