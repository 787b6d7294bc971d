package workers

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// A worker that stops on purpose (SIGTERM: a rolling upgrade, a scale-down, `dlc worker`
// ended by hand) hands its running activities to the other workers at once, instead of
// holding them until their heartbeat timeout (a minute for the job-long ones) as a
// worker that died does.
//
// When the worker starts to stop, the SDK closes the activities' worker-stop channel and
// then waits up to stopTimeout for the running activities to return and report. The
// handoff interceptor cancels the context of every running activity as soon as that
// channel closes and reports its end as a retryable failure of type
// ErrTypeWorkerStopping; Temporal schedules the activity's next attempt after its retry
// policy's first interval (1 s), and a worker that still polls takes it. Every activity
// is already written to be retried after a worker's death at any point (the job-long
// ones take up where the last attempt left off, the launches and stops are idempotent,
// events and log lines carry message ids, a quota request its update id), and a
// cancellation is one such point, reported at once. Local activities run inside a
// workflow task and are left to the SDK.

// ErrTypeWorkerStopping is the failure type of an activity handed off by a stopping
// worker.
const ErrTypeWorkerStopping = "WorkerStopping"

// stopTimeout is the worker's WorkerStopTimeout: how long a stopping worker waits for
// its running activities to return once cancelled and to report. They return in
// moments; the bound is for an activity that ignores its context, and stays well within
// Kubernetes' default termination grace period of 30 s.
const stopTimeout = 5 * time.Second

// WithHandoff makes a worker with opts hand its running activities to the other workers
// when it stops: the handoff interceptor first, and a WorkerStopTimeout of at least
// stopTimeout, so that the handed-off activities' failures are reported before the
// worker is gone. The job worker has it (workerOptions), and so has every other worker
// the stack runs (the trigger gates' activities, package triggers).
func WithHandoff(opts worker.Options) worker.Options {
	opts.WorkerStopTimeout = max(opts.WorkerStopTimeout, stopTimeout)
	opts.Interceptors = append([]interceptor.WorkerInterceptor{&handoffInterceptor{}}, opts.Interceptors...)
	return opts
}

// errWorkerStopping is the cause a handed-off activity's context is cancelled with.
var errWorkerStopping = errors.New("the worker is stopping")

// handoffInterceptor is one worker's: it holds the cancel functions of that worker's
// running activities and one goroutine, started with the first activity, that waits
// for the worker's stop channel and cancels them all (a goroutine per activity would
// cost two per running job).
type handoffInterceptor struct {
	interceptor.WorkerInterceptorBase
	watch   sync.Once
	mu      sync.Mutex
	stopped bool
	next    int
	cancels map[int]context.CancelCauseFunc
}

func (w *handoffInterceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	h := &handoffInbound{w: w}
	h.Next = next
	return h
}

// add registers an activity's cancel function; it cancels at once when the worker is
// already stopping. The returned func unregisters it.
func (w *handoffInterceptor) add(stopping <-chan struct{}, cancel context.CancelCauseFunc) func() {
	w.watch.Do(func() {
		go func() {
			<-stopping
			w.mu.Lock()
			defer w.mu.Unlock()
			w.stopped = true
			for _, c := range w.cancels {
				c(errWorkerStopping)
			}
		}()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		cancel(errWorkerStopping)
		return func() {}
	}
	if w.cancels == nil {
		w.cancels = map[int]context.CancelCauseFunc{}
	}
	id := w.next
	w.next++
	w.cancels[id] = cancel
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.cancels, id)
	}
}

type handoffInbound struct {
	interceptor.ActivityInboundInterceptorBase
	w *handoffInterceptor
}

func (h *handoffInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if activity.GetInfo(ctx).IsLocalActivity {
		return h.Next.ExecuteActivity(ctx, in)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer h.w.add(activity.GetWorkerStopChannel(ctx), cancel)()
	res, err := h.Next.ExecuteActivity(ctx, in)
	if err != nil && errors.Is(context.Cause(ctx), errWorkerStopping) {
		return nil, temporal.NewApplicationErrorWithCause("the worker is stopping: the activity goes on on another worker", ErrTypeWorkerStopping, err)
	}
	return res, err
}
