package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The trigger gate: one workflow per trigger that has controls (debounce, rateLimit,
// maxConcurrentRuns; docs/triggers.md, "Controls"). The trigger dispatcher hands it each
// event with SignalWithStart (signal SignalTriggerEvent) and acknowledges the event once
// Temporal has it; the gate drops the ids it has seen, gathers the events of a debounce
// window into one batch, and starts each batch's run, under the trigger's rate limit and
// concurrency bound, through activities that the dispatcher's process serves on
// TriggerActivityQueue (package triggers): the gate holds the state, the dispatcher knows
// the trigger and the services. A run is named after its batch's first event, so the
// start activity, retried or replayed, starts it once.

// Names of the trigger gate workflow, its signal, query and activities.
const (
	// TriggerGateWorkflowName is the trigger gate's workflow type.
	TriggerGateWorkflowName = "TriggerGate"
	// SignalTriggerEvent hands the gate an event (TriggerGateEvent).
	SignalTriggerEvent = "trigger-event"
	// QueryTriggerGate answers the gate's TriggerGateState.
	QueryTriggerGate = "trigger-gate"
	// ActivityTriggerStartRun starts a batch's run (TriggerStartRunInput).
	ActivityTriggerStartRun = "TriggerStartRun"
	// ActivityTriggerWaitRun returns when a run the trigger started has ended
	// (TriggerRunRef).
	ActivityTriggerWaitRun = "TriggerWaitRun"
)

// TriggerActivityQueue is the task queue of the trigger gate's activities, which the
// trigger dispatchers serve, next to the workers' taskQueue.
func TriggerActivityQueue(taskQueue string) string { return taskQueue + "-triggers" }

// TriggerGateWorkflowID is the id of a trigger's gate.
func TriggerGateWorkflowID(workspace, trigger string) string {
	return fmt.Sprintf("dlc/%s/trigger-gate/%s", workspace, trigger)
}

// Bounds of the gate.
const (
	// triggerGateSeen is how many event ids a gate remembers to drop repeats; older
	// repeats are named like their run and refused by Temporal (reject duplicate).
	triggerGateSeen = 4096
	// TriggerMaxBatch bounds the events of one debounce window: the window's run starts
	// when it holds this many, or when their params would no longer fit in
	// ${params.events} (TriggerMaxEventsParam bytes).
	TriggerMaxBatch = 100
	// TriggerMaxEventsParam bounds the JSON of a debounced run's ${params.events}: the
	// longest value a param may have (schemas.MaxTemplateValueLength).
	TriggerMaxEventsParam = 4096
	// triggerGateEventsPerRun is how many events a gate run handles before it
	// continues as new.
	triggerGateEventsPerRun = 500
	// triggerGateDropped bounds the dropped batches the state lists.
	triggerGateDropped = 20
)

// TriggerControls are a trigger's controls, as the dispatcher hands them with each
// event (the newest apply).
type TriggerControls struct {
	Debounce      time.Duration `json:"debounce,omitempty"`
	MaxConcurrent int           `json:"maxConcurrent,omitempty"`
	RateRuns      int           `json:"rateRuns,omitempty"`
	RatePeriod    time.Duration `json:"ratePeriod,omitempty"`
	// Drop drops a batch that cannot start at once, instead of queueing it.
	Drop bool `json:"drop,omitempty"`
}

// TriggerGateEvent is one event for the gate.
type TriggerGateEvent struct {
	// ID is the event's id; Params the trigger's params resolved for it (a debounced
	// run's ${params.events} lists them); Subject where it came from and Key what it is
	// about (for the fired event).
	ID       string            `json:"id"`
	Params   map[string]string `json:"params,omitempty"`
	Subject  string            `json:"subject,omitempty"`
	Key      string            `json:"key,omitempty"`
	Controls TriggerControls   `json:"controls"`
}

// TriggerBatch is the events one run starts for.
type TriggerBatch struct {
	Events []TriggerGateEvent `json:"events"`
}

// TriggerRunRef names a run a trigger started.
type TriggerRunRef struct {
	Workspace string `json:"workspace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

// TriggerStartRunInput is the input of ActivityTriggerStartRun.
type TriggerStartRunInput struct {
	Workspace string       `json:"workspace"`
	Trigger   string       `json:"trigger"`
	Batch     TriggerBatch `json:"batch"`
}

// TriggerStartRunResult is what ActivityTriggerStartRun did: the run it started (or
// found started), or why it started none (the trigger was deleted, or its action is
// invalid for these events).
type TriggerStartRunResult struct {
	Run     *TriggerRunRef `json:"run,omitempty"`
	Refused string         `json:"refused,omitempty"`
}

// TriggerDropped is a batch a gate dropped: it could not start when it was ready.
type TriggerDropped struct {
	FirstEvent string    `json:"firstEvent"`
	Events     int       `json:"events"`
	Time       time.Time `json:"time"`
	Reason     string    `json:"reason"`
}

// TriggerGateState is a gate's state, carried over when it continues as new, and
// answered to QueryTriggerGate.
type TriggerGateState struct {
	Workspace string          `json:"workspace"`
	Trigger   string          `json:"trigger"`
	Controls  TriggerControls `json:"controls"`
	// Seen are the latest event ids, oldest first.
	Seen []string `json:"seen,omitempty"`
	// Window is the open debounce window's batch, which closes at WindowEnd.
	Window    *TriggerBatch `json:"window,omitempty"`
	WindowEnd time.Time     `json:"windowEnd,omitzero"`
	// Queue are the batches waiting for the limits, oldest first.
	Queue []TriggerBatch `json:"queue,omitempty"`
	// Running are the started runs not yet ended (with MaxConcurrent).
	Running []TriggerRunRef `json:"running,omitempty"`
	// Starts are the start times within the rate limit's period.
	Starts []time.Time `json:"starts,omitempty"`
	// Events, Started, Refused and DroppedCount count since the gate was created.
	Events       int              `json:"events"`
	Started      int              `json:"started"`
	Refused      int              `json:"refused"`
	DroppedCount int              `json:"droppedCount"`
	Dropped      []TriggerDropped `json:"dropped,omitempty"`
}

type triggerGate struct {
	st      TriggerGateState
	seen    map[string]bool
	waits   map[string]workflow.Future
	handled int
}

// TriggerGateWorkflow is the gate of one trigger (see above). It runs until its
// trigger's events stop coming: it never ends on its own, and continues as new every
// triggerGateEventsPerRun events.
func TriggerGateWorkflow(ctx workflow.Context, st TriggerGateState) error {
	g := &triggerGate{st: st, seen: map[string]bool{}, waits: map[string]workflow.Future{}}
	for _, id := range st.Seen {
		g.seen[id] = true
	}
	if err := workflow.SetQueryHandler(ctx, QueryTriggerGate, func() (TriggerGateState, error) { return g.st, nil }); err != nil {
		return err
	}
	events := workflow.GetSignalChannel(ctx, SignalTriggerEvent)
	for _, r := range g.st.Running {
		g.wait(ctx, r)
	}
	for {
		g.dispatch(ctx)
		if g.handled >= triggerGateEventsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			var e TriggerGateEvent
			for events.ReceiveAsync(&e) {
				g.receive(ctx, e)
			}
			g.dispatch(ctx)
			return workflow.NewContinueAsNewError(ctx, TriggerGateWorkflowName, g.st)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(events, func(c workflow.ReceiveChannel, _ bool) {
			var e TriggerGateEvent
			c.Receive(ctx, &e)
			g.receive(ctx, e)
		})
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		if wake, ok := g.nextWake(ctx); ok {
			sel.AddFuture(workflow.NewTimer(timerCtx, wake), func(workflow.Future) {})
		}
		for _, r := range g.st.Running {
			if f, ok := g.waits[r.Name]; ok {
				sel.AddFuture(f, func(workflow.Future) { g.ended(r.Name) })
			}
		}
		sel.Select(ctx)
		cancelTimer()
	}
}

// receive takes an event: a repeat is dropped; with a debounce the event joins the
// open window (opening one), else it is a batch of its own.
func (g *triggerGate) receive(ctx workflow.Context, e TriggerGateEvent) {
	g.st.Controls = e.Controls
	if g.seen[e.ID] {
		return
	}
	g.seen[e.ID] = true
	g.st.Seen = append(g.st.Seen, e.ID)
	if n := len(g.st.Seen) - triggerGateSeen; n > 0 {
		for _, id := range g.st.Seen[:n] {
			delete(g.seen, id)
		}
		g.st.Seen = append([]string(nil), g.st.Seen[n:]...)
	}
	g.st.Events++
	g.handled++
	e.Controls = TriggerControls{}
	if d := g.st.Controls.Debounce; d > 0 {
		if g.st.Window != nil && len(TriggerEventsParam(append(slices.Clip(g.st.Window.Events), e))) > TriggerMaxEventsParam {
			g.closeWindow()
		}
		if g.st.Window == nil {
			g.st.Window = &TriggerBatch{}
			g.st.WindowEnd = workflow.Now(ctx).Add(d)
		}
		g.st.Window.Events = append(g.st.Window.Events, e)
		if len(g.st.Window.Events) >= TriggerMaxBatch {
			g.closeWindow()
		}
		return
	}
	g.st.Queue = append(g.st.Queue, TriggerBatch{Events: []TriggerGateEvent{e}})
}

// TriggerEventsParam is a debounced run's ${params.events}: the JSON list of its events'
// params, in arrival order.
func TriggerEventsParam(events []TriggerGateEvent) string {
	list := make([]map[string]string, len(events))
	for i, e := range events {
		list[i] = e.Params
		if list[i] == nil {
			list[i] = map[string]string{}
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "[]"
	}
	return string(b)
}

func (g *triggerGate) closeWindow() {
	if g.st.Window != nil {
		g.st.Queue = append(g.st.Queue, *g.st.Window)
	}
	g.st.Window, g.st.WindowEnd = nil, time.Time{}
}

// ended records that a run has ended.
func (g *triggerGate) ended(name string) {
	delete(g.waits, name)
	for i, r := range g.st.Running {
		if r.Name == name {
			g.st.Running = append(g.st.Running[:i:i], g.st.Running[i+1:]...)
			break
		}
	}
}

// limited says why a batch cannot start now ("" when it can), and when the rate limit
// lets the next one start.
func (g *triggerGate) limited(now time.Time) (string, time.Time) {
	c := g.st.Controls
	if c.RateRuns > 0 && c.RatePeriod > 0 {
		kept := g.st.Starts[:0:0]
		for _, s := range g.st.Starts {
			if now.Sub(s) < c.RatePeriod {
				kept = append(kept, s)
			}
		}
		g.st.Starts = kept
		if len(kept) >= c.RateRuns {
			return fmt.Sprintf("rate limit: %d runs in %s", c.RateRuns, c.RatePeriod), kept[len(kept)-c.RateRuns].Add(c.RatePeriod)
		}
	}
	if c.MaxConcurrent > 0 && len(g.st.Running) >= c.MaxConcurrent {
		return fmt.Sprintf("maxConcurrentRuns: %d runs running", len(g.st.Running)), time.Time{}
	}
	return "", time.Time{}
}

// dispatch closes a window whose time is up and starts the queued batches the limits
// let start; with overflow drop, the others are dropped.
func (g *triggerGate) dispatch(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if g.st.Window != nil && !now.Before(g.st.WindowEnd) {
		g.closeWindow()
	}
	for len(g.st.Queue) > 0 {
		why, _ := g.limited(now)
		if why != "" {
			if !g.st.Controls.Drop {
				return
			}
			b := g.st.Queue[0]
			g.st.Queue = g.st.Queue[1:]
			g.st.DroppedCount++
			g.st.Dropped = append(g.st.Dropped, TriggerDropped{FirstEvent: b.Events[0].ID, Events: len(b.Events), Time: now, Reason: why})
			if n := len(g.st.Dropped) - triggerGateDropped; n > 0 {
				g.st.Dropped = g.st.Dropped[n:]
			}
			workflow.GetLogger(ctx).Warn("trigger run dropped", "trigger", g.st.Trigger, "event", b.Events[0].ID, "reason", why)
			continue
		}
		b := g.st.Queue[0]
		g.st.Queue = g.st.Queue[1:]
		g.start(ctx, b)
		now = workflow.Now(ctx)
	}
}

// start starts a batch's run through the dispatcher's activity, retried until it
// answers: the run is named after the batch's first event, so no retry starts two.
func (g *triggerGate) start(ctx workflow.Context, b TriggerBatch) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TriggerActivityQueue(workflow.GetInfo(ctx).TaskQueueName),
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	var res TriggerStartRunResult
	err := workflow.ExecuteActivity(actx, ActivityTriggerStartRun, TriggerStartRunInput{
		Workspace: g.st.Workspace, Trigger: g.st.Trigger, Batch: b}).Get(ctx, &res)
	if err != nil || res.Run == nil {
		g.st.Refused++
		workflow.GetLogger(ctx).Warn("trigger run not started", "trigger", g.st.Trigger, "event", b.Events[0].ID, "refused", res.Refused, "error", err)
		return
	}
	g.st.Started++
	g.st.Starts = append(g.st.Starts, workflow.Now(ctx))
	if g.st.Controls.MaxConcurrent > 0 {
		g.st.Running = append(g.st.Running, *res.Run)
		g.wait(ctx, *res.Run)
	}
}

// wait starts the activity that returns when run has ended.
func (g *triggerGate) wait(ctx workflow.Context, run TriggerRunRef) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TriggerActivityQueue(workflow.GetInfo(ctx).TaskQueueName),
		StartToCloseTimeout: 30 * 24 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	g.waits[run.Name] = workflow.ExecuteActivity(actx, ActivityTriggerWaitRun, run)
}

// nextWake is when the gate must look again without a signal: the debounce window's
// end, or when the rate limit lets a queued batch start.
func (g *triggerGate) nextWake(ctx workflow.Context) (time.Duration, bool) {
	now := workflow.Now(ctx)
	var at time.Time
	if g.st.Window != nil {
		at = g.st.WindowEnd
	}
	if len(g.st.Queue) > 0 {
		if why, next := g.limited(now); why != "" && !next.IsZero() && (at.IsZero() || next.Before(at)) {
			at = next
		}
	}
	if at.IsZero() {
		return 0, false
	}
	return max(at.Sub(now), time.Millisecond), true
}
