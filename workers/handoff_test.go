package workers

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// A running activity is cancelled when its worker starts to stop and ends with a
// retryable WorkerStopping failure; one that returns before the stop is untouched.
func TestHandoffEndsRunningActivitiesWhenTheWorkerStops(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&handoffInterceptor{}}})
	env.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, activity.RegisterOptions{Name: "Wait"})
	env.RegisterActivityWithOptions(func(context.Context) (string, error) { return "done", nil }, activity.RegisterOptions{Name: "Quick"})

	v, err := env.ExecuteActivity("Quick")
	var got string
	if err != nil || v.Get(&got) != nil || got != "done" {
		t.Fatalf("Quick: %q, %v; want done", got, err)
	}

	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	_, err = env.ExecuteActivity("Wait")
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeWorkerStopping || app.NonRetryable() {
		t.Fatalf("Wait: %v; want a retryable %s failure", err, ErrTypeWorkerStopping)
	}
}

// WithHandoff, the options every worker of the stack is built with (the job worker's
// workerOptions and the trigger gates' worker), hands a running activity off when the
// worker stops, keeps the caller's interceptors after its own, and waits at least
// stopTimeout for the handed-off activities to report.
func TestWithHandoffHandsOffAndKeepsTheCallersOptions(t *testing.T) {
	mine := &interceptor.WorkerInterceptorBase{}
	opts := WithHandoff(worker.Options{Interceptors: []interceptor.WorkerInterceptor{mine}, WorkerStopTimeout: time.Second})
	if len(opts.Interceptors) != 2 || opts.Interceptors[1] != mine {
		t.Fatalf("interceptors %v: want the handoff's, then the caller's", opts.Interceptors)
	}
	if opts.WorkerStopTimeout != stopTimeout {
		t.Errorf("WorkerStopTimeout %s: want %s", opts.WorkerStopTimeout, stopTimeout)
	}
	if o := WithHandoff(worker.Options{WorkerStopTimeout: time.Minute}); o.WorkerStopTimeout != time.Minute {
		t.Errorf("WorkerStopTimeout %s: want the caller's longer minute kept", o.WorkerStopTimeout)
	}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	env.SetWorkerOptions(WithHandoff(worker.Options{}))
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}, activity.RegisterOptions{Name: "Wait"})
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	_, err := env.ExecuteActivity("Wait")
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeWorkerStopping || app.NonRetryable() {
		t.Fatalf("Wait: %v; want a retryable %s failure", err, ErrTypeWorkerStopping)
	}
}
