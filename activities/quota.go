package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// QuotaAmounts are resources as a workspace quota counts them.
type QuotaAmounts struct {
	GPU         int64 `json:"gpu,omitempty"`
	MilliCPU    int64 `json:"milliCPU,omitempty"`
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// GPUModels are the GPUs of a given accelerator model (the value of the node
	// label nvidia.com/gpu.product a role selects), by model. They are part of GPU too.
	GPUModels map[string]int64 `json:"gpuModels,omitempty"`
}

// Add returns a+b, each amount saturating: a sum past math.MaxInt64 is math.MaxInt64,
// and a negative amount counts as 0, so that no sum wraps around or goes negative.
func (a QuotaAmounts) Add(b QuotaAmounts) QuotaAmounts {
	sum := QuotaAmounts{GPU: SaturatingAdd(a.GPU, b.GPU), MilliCPU: SaturatingAdd(a.MilliCPU, b.MilliCPU),
		MemoryBytes: SaturatingAdd(a.MemoryBytes, b.MemoryBytes)}
	for _, m := range []map[string]int64{a.GPUModels, b.GPUModels} {
		for model, n := range m {
			if sum.GPUModels == nil {
				sum.GPUModels = map[string]int64{}
			}
			sum.GPUModels[model] = SaturatingAdd(sum.GPUModels[model], n)
		}
	}
	return sum
}

// Sub returns a-b, each amount at least 0.
func (a QuotaAmounts) Sub(b QuotaAmounts) QuotaAmounts {
	sub := func(x, y int64) int64 {
		x, y = max(x, 0), max(y, 0)
		return max(x-y, 0) // both non-negative: x-y cannot overflow
	}
	d := QuotaAmounts{GPU: sub(a.GPU, b.GPU), MilliCPU: sub(a.MilliCPU, b.MilliCPU), MemoryBytes: sub(a.MemoryBytes, b.MemoryBytes)}
	for model, n := range a.GPUModels {
		if left := sub(n, b.GPUModels[model]); left > 0 {
			if d.GPUModels == nil {
				d.GPUModels = map[string]int64{}
			}
			d.GPUModels[model] = left
		}
	}
	return d
}

// SaturatingAdd is x+y for amounts: negative ones count as 0, and a sum past
// math.MaxInt64 is math.MaxInt64.
func SaturatingAdd(x, y int64) int64 {
	x, y = max(x, 0), max(y, 0)
	if x > math.MaxInt64-y {
		return math.MaxInt64
	}
	return x + y
}

// SaturatingMul is x*y for amounts: negative ones count as 0, and a product past
// math.MaxInt64 is math.MaxInt64.
func SaturatingMul(x, y int64) int64 {
	x, y = max(x, 0), max(y, 0)
	if x != 0 && y > math.MaxInt64/x {
		return math.MaxInt64
	}
	return x * y
}

// QuotaActivities talk to Temporal on behalf of the workspace quota: a job asks its
// workspace's quota workflow for admission, and the quota workflow finds jobs that ended
// without giving their share back.
type QuotaActivities struct {
	Client client.Client
	// StartOptions are the options that start the quota workflow of workflowID on
	// taskQueue when it does not run yet (workflows.QuotaStartOptions: the one
	// definition of how a quota workflow starts).
	StartOptions func(workflowID, taskQueue string) client.StartWorkflowOptions
	// RequestConcurrency caps how many quota requests this process has in flight to
	// one quota workflow; the others wait their turn. 0: DefaultQuotaRequestConcurrency.
	RequestConcurrency int

	mu       sync.Mutex
	requests map[string]chan struct{} // quota workflow id → its request slots
}

// DefaultQuotaRequestConcurrency is how many quota requests one process sends to one
// quota workflow at once. The Temporal server admits at most 10 updates in flight per
// workflow (dynamic config history.maxInFlightUpdates) and refuses the rest with
// ResourceExhausted; concurrent update-with-starts on one workflow also contend for
// its lock ("Workflow is busy"). A workspace's burst of jobs, each retrying its
// refused request at once, kept its quota workflow from admitting anyone for minutes
// in the full-size scale run, and the jobs whose requests kept failing for 10 minutes
// ended QuotaUnavailable (docs/performance.md). Four leaves room for a second worker
// under the server's ten.
const DefaultQuotaRequestConcurrency = 4

// RequestQuotaInput names the quota workflow and carries the request. The workflow
// type, task queue and first state are the caller's (workflows.QuotaStart), so this
// package needs no workflow names.
type RequestQuotaInput struct {
	WorkflowID   string `json:"workflowID"`
	WorkflowType string `json:"workflowType"`
	TaskQueue    string `json:"taskQueue"`
	UpdateName   string `json:"updateName"`
	// UpdateID makes a retried request one request.
	UpdateID string `json:"updateID"`
	// Request and the decision are opaque here: the workflows package defines them.
	Request any `json:"request"`
	// InitialState starts the quota workflow when it does not exist yet.
	InitialState any `json:"initialState"`
}

// RequestQuota sends the request update to the quota workflow, starting it if needed,
// and returns the decision.
func (a *QuotaActivities) RequestQuota(ctx context.Context, in RequestQuotaInput) (map[string]any, error) {
	if a.Client == nil || a.StartOptions == nil {
		return nil, errors.New("quota activities have no Temporal client or start options")
	}
	release, err := a.takeRequestSlot(ctx, in.WorkflowID)
	if err != nil {
		return nil, err
	}
	defer release()
	start := a.Client.NewWithStartWorkflowOperation(a.StartOptions(in.WorkflowID, in.TaskQueue), in.WorkflowType, in.InitialState)
	handle, err := a.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:     in.UpdateID,
			UpdateName:   in.UpdateName,
			Args:         []any{in.Request},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("quota request to %s: %w", in.WorkflowID, err)
	}
	var decision map[string]any
	if err := handle.Get(ctx, &decision); err != nil {
		return nil, fmt.Errorf("quota request to %s: %w", in.WorkflowID, err)
	}
	return decision, nil
}

// takeRequestSlot waits for one of the request slots of the quota workflow id, or for
// ctx to end; the returned func gives the slot back.
func (a *QuotaActivities) takeRequestSlot(ctx context.Context, id string) (release func(), err error) {
	a.mu.Lock()
	if a.requests == nil {
		a.requests = map[string]chan struct{}{}
	}
	slots, ok := a.requests[id]
	if !ok {
		n := a.RequestConcurrency
		if n <= 0 {
			n = DefaultQuotaRequestConcurrency
		}
		slots = make(chan struct{}, n)
		a.requests[id] = slots
	}
	a.mu.Unlock()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("quota request to %s: waiting for one of this worker's request slots: %w", id, ctx.Err())
	}
}

// ClosedJobs returns the ids, among ids, of workflows that are closed or gone.
func (a *QuotaActivities) ClosedJobs(ctx context.Context, ids []string) ([]string, error) {
	if a.Client == nil {
		return nil, errors.New("quota activities have no Temporal client")
	}
	var closed []string
	for _, id := range ids {
		d, err := a.Client.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			closed = append(closed, id)
		case err != nil:
			return nil, err
		case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			closed = append(closed, id)
		}
	}
	return closed, nil
}
