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
