package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// historyMeter counts, for one run of one workflow in a test environment, the events
// and bytes its history would have on a Temporal server: the test environment keeps no
// history, so GetInfo's history length and size are fed from this count instead, and
// the workflow's continue-as-new decisions see it.
//
// The count errs on the large side: every wake-up (an activity or timer completing, a
// signal, an update) is counted as a workflow task of its own (3 events) although the
// server batches what arrives together into one, and every event is counted at
// meterEventBytes plus its payloads (the server's events without payload are smaller).
type historyMeter struct {
	interceptor.WorkerInterceptorBase
	env *testsuite.TestWorkflowEnvironment
	// workflowType is the metered workflow: children and others are left out.
	workflowType string

	mu       sync.Mutex
	events   int
	bytes    int
	versions map[string]bool
	// lastInput is the input of the activity scheduled last, by type.
	lastInput map[string]any
}

// meterEventBytes is what one event is counted for, besides its payloads.
const meterEventBytes = 300

// workflowTaskEvents are the events of one workflow task: scheduled, started, completed.
const workflowTaskEvents = 3

// meterHistory meters the history of the run of workflowType about to run in env,
// started with input.
func meterHistory(env *testsuite.TestWorkflowEnvironment, workflowType string, input any) *historyMeter {
	m := &historyMeter{env: env, workflowType: workflowType, versions: map[string]bool{}, lastInput: map[string]any{}}
	m.add(1+workflowTaskEvents, payloadSize(input)) // WorkflowExecutionStarted, first task
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{m}})
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		m.add(1, 0) // ActivityTaskStarted
	})
	env.SetOnActivityCompletedListener(func(_ *activity.Info, result converter.EncodedValue, err error) {
		size := 0
		if err != nil {
			size = len(err.Error())
		} else if result != nil && result.HasValue() {
			var raw json.RawMessage
			if result.Get(&raw) == nil {
				size = len(raw)
			}
		}
		m.add(1+workflowTaskEvents, size) // ActivityTaskCompleted (or Failed), a task
	})
	env.SetOnActivityCanceledListener(func(*activity.Info) {
		m.add(2+workflowTaskEvents, 0) // cancel requested, canceled, a task
	})
	env.SetOnLocalActivityCompletedListener(func(_ *activity.Info, result converter.EncodedValue, _ error) {
		size := 0
		if result != nil && result.HasValue() {
			var raw json.RawMessage
			if result.Get(&raw) == nil {
				size = len(raw)
			}
		}
		m.add(1+workflowTaskEvents, size) // the marker, a task
	})
	env.SetOnTimerScheduledListener(func(string, time.Duration) { m.add(1, 0) })
	env.SetOnTimerFiredListener(func(string) { m.add(1+workflowTaskEvents, 0) })
	env.SetOnTimerCanceledListener(func(string) { m.add(1, 0) })
	return m
}

// add counts n events and their payload bytes.
func (m *historyMeter) add(n, payload int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events += n
	m.bytes += n*meterEventBytes + payload
}

// signalled counts a signal or an update the test sends (with its workflow task).
func (m *historyMeter) signalled(events int, arg any) {
	m.add(events+workflowTaskEvents, payloadSize(arg))
}

// closed counts the run's closing event with its payload (a result, or the next
// run's input) and returns the run's totals.
func (m *historyMeter) closed(payload any) (events, bytes int) {
	m.add(1, payloadSize(payload))
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events, m.bytes
}

func (m *historyMeter) totals() (events, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events, m.bytes
}

// input is the input of the activity of this type scheduled last.
func (m *historyMeter) input(activityType string) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastInput[activityType]
}

func payloadSize(v any) int {
	if v == nil {
		return 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// InterceptWorkflow meters the workflow of m's type.
func (m *historyMeter) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != m.workflowType {
		return next
	}
	return &meterInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: m}
}

type meterInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	m *historyMeter
}

func (i *meterInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&meterOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, m: i.m})
}

// meterOutbound counts the commands the workflow emits, and answers GetInfo with the
// metered history length and size.
type meterOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	m *historyMeter
}

func (o *meterOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	size := 0
	for _, a := range args {
		size += payloadSize(a)
	}
	o.m.add(1, size) // ActivityTaskScheduled
	o.m.mu.Lock()
	if len(args) > 0 {
		o.m.lastInput[activityType] = args[0]
	}
	o.m.mu.Unlock()
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *meterOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	size := 0
	for _, a := range args {
		size += payloadSize(a)
	}
	o.m.add(0, size) // the marker carries the input too
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

func (o *meterOutbound) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	size := 0
	for _, a := range args {
		size += payloadSize(a)
	}
	// Initiated, started, completed, and the tasks of the last two.
	o.m.add(3+2*workflowTaskEvents, size)
	return o.Next.ExecuteChildWorkflow(ctx, childType, args...)
}

func (o *meterOutbound) SignalExternalWorkflow(ctx workflow.Context, id, runID, name string, arg any) workflow.Future {
	o.m.add(2+workflowTaskEvents, payloadSize(arg)) // initiated, signaled, a task
	return o.Next.SignalExternalWorkflow(ctx, id, runID, name, arg)
}

func (o *meterOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	o.m.add(1, 100)
	return o.Next.UpsertTypedSearchAttributes(ctx, attrs...)
}

func (o *meterOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	o.m.mu.Lock()
	first := !o.m.versions[changeID]
	o.m.versions[changeID] = true
	o.m.mu.Unlock()
	if first {
		o.m.add(1, len(changeID)) // the version marker
	}
	return o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
}

func (o *meterOutbound) GetInfo(ctx workflow.Context) *workflow.Info {
	events, bytes := o.m.totals()
	o.m.env.SetCurrentHistoryLength(events)
	o.m.env.SetCurrentHistorySize(bytes)
	return o.Next.GetInfo(ctx)
}

// queryAtStart queries a run as soon as it answers (the test environment may let a
// callback run before the workflow's first task has set its handlers), trying again
// every millisecond of workflow time, and calls done with the answer.
func queryAtStart(env *testsuite.TestWorkflowEnvironment, queryType string, done func(converter.EncodedValue, error), args ...any) {
	tries := 0
	var try func()
	try = func() {
		v, err := env.QueryWorkflow(queryType, args...)
		if err != nil && tries < 100 && strings.Contains(err.Error(), "unknown queryType") {
			tries++
			env.RegisterDelayedCallback(try, time.Millisecond)
			return
		}
		done(v, err)
	}
	env.RegisterDelayedCallback(try, time.Millisecond)
}
