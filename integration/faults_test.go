package integration

import (
	"context"
	"errors"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// faults injects failures into activities of the workflows whose id contains a marker:
// after the activity has done its work, its first attempt reports an error, as if the
// worker had died before the result reached Temporal. Temporal then retries it.
type faults struct {
	interceptor.WorkerInterceptorBase
	mu       sync.Mutex
	failures map[string]int // "<workflow id marker>|<activity type>" → attempts to fail
	injected map[string]int
}

func newFaults() *faults {
	return &faults{failures: map[string]int{}, injected: map[string]int{}}
}

// failAfter makes the first n attempts of activityType fail after doing their work, for
// workflows whose id contains marker.
func (f *faults) failAfter(marker, activityType string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[marker+"|"+activityType] = n
}

// count is how many failures were injected.
func (f *faults) count(marker, activityType string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected[marker+"|"+activityType]
}

func (f *faults) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &faultyActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, f: f}
}

type faultyActivity struct {
	interceptor.ActivityInboundInterceptorBase
	f *faults
}

func (a *faultyActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err != nil {
		return res, err
	}
	info := activity.GetInfo(ctx)
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	for key, n := range a.f.failures {
		marker, typ, _ := strings.Cut(key, "|")
		if typ == info.ActivityType.Name && strings.Contains(info.WorkflowExecution.ID, marker) && a.f.injected[key] < n {
			a.f.injected[key]++
			return nil, errors.New("injected fault: the result of a successful attempt was lost")
		}
	}
	return res, nil
}

var _ interceptor.WorkerInterceptor = (*faults)(nil)
