package activities

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/internal/testutil"
)

// updateCountingClient answers quota requests after hold is closed and records, per
// workflow id, how many it had in flight at most.
type updateCountingClient struct {
	client.Client // nil: a call the test does not expect panics
	hold          chan struct{}

	mu       sync.Mutex
	inFlight map[string]int
	peak     map[string]int
	calls    map[string]int
}

func newUpdateCountingClient() *updateCountingClient {
	return &updateCountingClient{hold: make(chan struct{}), inFlight: map[string]int{}, peak: map[string]int{}, calls: map[string]int{}}
}

func (c *updateCountingClient) NewWithStartWorkflowOperation(client.StartWorkflowOptions, any, ...any) client.WithStartWorkflowOperation {
	return nil
}

func (c *updateCountingClient) UpdateWithStartWorkflow(ctx context.Context, o client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	id := o.UpdateOptions.UpdateID[:strings.Index(o.UpdateOptions.UpdateID, ":")]
	c.mu.Lock()
	c.calls[id]++
	c.inFlight[id]++
	c.peak[id] = max(c.peak[id], c.inFlight[id])
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight[id]--
		c.mu.Unlock()
	}()
	select {
	case <-c.hold:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return grantedHandle{}, nil
}

func (c *updateCountingClient) get(m map[string]int, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[id]
}

type grantedHandle struct{ client.WorkflowUpdateHandle }

func (grantedHandle) Get(_ context.Context, v any) error {
	*(v.(*map[string]any)) = map[string]any{"granted": true}
	return nil
}

// A burst of jobs of one workspace sends its quota workflow at most
// RequestConcurrency requests at a time from one worker; the rest wait for a slot
// without calling Temporal, and another workspace's requests do not wait behind them.
func TestQuotaRequestsTakeTurnsPerQuotaWorkflow(t *testing.T) {
	c := newUpdateCountingClient()
	a := &QuotaActivities{Client: c, StartOptions: func(id, _ string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id}
	}}
	request := func(ctx context.Context, workspace string, job int) error {
		_, err := a.RequestQuota(ctx, RequestQuotaInput{
			WorkflowID: "dlc/" + workspace + "/quota", UpdateName: "request",
			UpdateID: workspace + ":" + string(rune('a'+job)) + ":quota",
		})
		return err
	}
	const burst = 3 * DefaultQuotaRequestConcurrency
	errs := make(chan error, burst+DefaultQuotaRequestConcurrency)
	for j := range burst {
		go func() { errs <- request(context.Background(), "busy", j) }()
	}
	testutil.Eventually(t, 10*time.Second, "the busy workspace's requests to fill its slots", func() bool {
		return c.get(c.inFlight, "busy") >= DefaultQuotaRequestConcurrency
	})
	for j := range DefaultQuotaRequestConcurrency {
		go func() { errs <- request(context.Background(), "other", j) }()
	}
	testutil.Eventually(t, 10*time.Second, "the other workspace's requests to be sent beside the busy one's", func() bool {
		return c.get(c.inFlight, "other") == DefaultQuotaRequestConcurrency
	})
	if n := c.get(c.calls, "busy"); n != DefaultQuotaRequestConcurrency {
		t.Fatalf("%d requests of the busy workspace reached Temporal while its slots were full, want %d", n, DefaultQuotaRequestConcurrency)
	}

	// A request whose attempt ends while it waits for a slot says so and calls nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err := request(ctx, "busy", burst)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request slots") {
		t.Fatalf("a request with no slot free before its deadline: %v, want a request-slot deadline error", err)
	}

	close(c.hold)
	for range burst + DefaultQuotaRequestConcurrency {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := c.get(c.calls, "busy"); n != burst {
		t.Errorf("the busy workspace sent %d requests, want %d", n, burst)
	}
	if p := c.get(c.peak, "busy"); p != DefaultQuotaRequestConcurrency {
		t.Errorf("the busy workspace had %d requests in flight at most, want %d", p, DefaultQuotaRequestConcurrency)
	}
}

// Quota amounts saturate: no sum or product wraps around, and none goes negative.
func TestQuotaAmountsSaturate(t *testing.T) {
	const top = math.MaxInt64
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"add", SaturatingAdd(2, 3), 5},
		{"add past the top", SaturatingAdd(top, 1), top},
		{"add two halves and more", SaturatingAdd(top/2+1, top/2+1), top},
		{"add a negative", SaturatingAdd(5, -7), 5},
		{"mul", SaturatingMul(1024, 4096000), 1024 * 4096000},
		{"mul past the top", SaturatingMul(1024, top/1000), top},
		{"mul by zero", SaturatingMul(0, top), 0},
		{"mul a negative", SaturatingMul(-1, 1000), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	a := QuotaAmounts{GPU: top, MilliCPU: 1, MemoryBytes: top - 1}
	if got := a.Add(QuotaAmounts{GPU: 1, MilliCPU: 1, MemoryBytes: 2}); !reflect.DeepEqual(got, QuotaAmounts{GPU: top, MilliCPU: 2, MemoryBytes: top}) {
		t.Errorf("Add: %+v", got)
	}
	if got := (QuotaAmounts{GPU: 1, MilliCPU: 1000}).Sub(QuotaAmounts{GPU: 2, MilliCPU: top}); !reflect.DeepEqual(got, QuotaAmounts{}) {
		t.Errorf("Sub below zero: %+v, want zero", got)
	}
	models := QuotaAmounts{GPU: 3, GPUModels: map[string]int64{"A100": 2, "H100": 1}}.Add(QuotaAmounts{GPU: 1, GPUModels: map[string]int64{"A100": 1}})
	if !reflect.DeepEqual(models, QuotaAmounts{GPU: 4, GPUModels: map[string]int64{"A100": 3, "H100": 1}}) {
		t.Errorf("Add by model: %+v", models)
	}
	if got := models.Sub(QuotaAmounts{GPU: 1, GPUModels: map[string]int64{"H100": 1}}); !reflect.DeepEqual(got, QuotaAmounts{GPU: 3, GPUModels: map[string]int64{"A100": 3}}) {
		t.Errorf("Sub by model: %+v", got)
	}
}
