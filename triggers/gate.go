package triggers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// A trigger with controls (debounce, rateLimit, maxConcurrentRuns) does not start its
// action for each event: the dispatcher hands the event to the trigger's gate, a
// Temporal workflow (workflows.TriggerGateWorkflow) that holds the state the controls
// need, durably, and starts the runs through the two activities below, which every
// dispatcher serves on workflows.TriggerActivityQueue. Triggers without controls keep
// the direct path.

// startGateWorker serves the gates' activities, once: a dispatcher starts it when it
// first loads a trigger with controls (a gate's activities reach any dispatcher that
// has one). A failure is logged, and tried again at the next such trigger.
func (d *Dispatcher) startGateWorker() {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	if d.tc == nil || d.gateWorker != nil || d.closed {
		return
	}
	// A dispatcher that stops hands a gate's running WaitRun to another at once, not
	// after its minute of heartbeat timeout (workers.WithHandoff).
	w := worker.New(d.tc, workflows.TriggerActivityQueue(d.taskQueue), workers.WithHandoff(worker.Options{}))
	w.RegisterActivityWithOptions(d.gateStartRun, activity.RegisterOptions{Name: workflows.ActivityTriggerStartRun})
	w.RegisterActivityWithOptions(d.gateWaitRun, activity.RegisterOptions{Name: workflows.ActivityTriggerWaitRun})
	if err := w.Start(); err != nil {
		d.log.Error("the trigger gates' activities are not served", "error", err)
		return
	}
	d.gateWorker = w
}

// controlsOf are the gate controls of a trigger.
func controlsOf(t *schemas.Trigger) workflows.TriggerControls {
	s := &t.Spec
	c := workflows.TriggerControls{
		Debounce:      s.Debounce.D(),
		MaxConcurrent: int(s.MaxConcurrentRuns),
		Drop:          s.Overflow == schemas.OverflowDrop,
	}
	if r := s.RateLimit; r != nil {
		c.RateRuns, c.RatePeriod = int(r.Runs), r.Period.D()
	}
	return c
}

// signalGate hands an event to its trigger's gate, starting the gate if it is not
// running. The event is acknowledged once Temporal has the signal; the gate drops a
// repeat.
func (d *Dispatcher) signalGate(t *schemas.Trigger, ev Event, params map[string]string) error {
	if d.tc == nil {
		return permanent("the trigger has controls, and this dispatcher has no Temporal client for its gate")
	}
	ws, name := t.Metadata.Workspace, t.Metadata.Name
	id := workflows.TriggerGateWorkflowID(ws, name)
	e := workflows.TriggerGateEvent{ID: ev.ID, Params: params, Subject: ev.Subject, Key: ev.Key, Controls: controlsOf(t)}
	ctx, cancel := context.WithTimeout(d.ctx, d.o.StartTimeout)
	defer cancel()
	_, err := d.tc.SignalWithStartWorkflow(ctx, id, workflows.SignalTriggerEvent, e,
		client.StartWorkflowOptions{ID: id, TaskQueue: d.taskQueue},
		workflows.TriggerGateWorkflowName, workflows.TriggerGateState{Workspace: ws, Trigger: name})
	if err != nil {
		return fmt.Errorf("signal the gate of trigger %s/%s: %w", ws, name, err)
	}
	d.log.Debug("event handed to the trigger's gate", "workspace", ws, "trigger", name, "event", ev.ID)
	return nil
}

// trigger returns the trigger stored under key, once every change stored so far is in
// effect.
func (d *Dispatcher) trigger(ctx context.Context, key string) *schemas.Trigger {
	d.catchUp(ctx)
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.bySubject[d.subjectOf[key]][key]
}

// gateStartRun starts a batch's run: named after its first event, with its last event's
// params and, for a debounced trigger, eventCount and events. The trigger as it is
// now applies; a deleted trigger, or an action these events make invalid, starts
// nothing (Refused).
func (d *Dispatcher) gateStartRun(ctx context.Context, in workflows.TriggerStartRunInput) (workflows.TriggerStartRunResult, error) {
	evs := in.Batch.Events
	if len(evs) == 0 {
		return workflows.TriggerStartRunResult{Refused: "no events"}, nil
	}
	t := d.trigger(ctx, Key(in.Workspace, in.Trigger))
	if t == nil {
		return workflows.TriggerStartRunResult{Refused: "the trigger was deleted"}, nil
	}
	last := evs[len(evs)-1]
	params := make(map[string]string, len(last.Params)+2)
	maps.Copy(params, last.Params)
	if t.Spec.Debounce.D() > 0 {
		params[schemas.ParamEventCount] = strconv.Itoa(len(evs))
		params[schemas.ParamEvents] = workflows.TriggerEventsParam(evs)
	}
	runName := schemas.TriggerRunName(t.Metadata.Name, evs[0].ID)
	kind, err := d.startRun(ctx, t, runName, params, evs[0].ID, evs[0].Subject, last.Key)
	if err != nil {
		if _, ok := errors.AsType[*permanentError](err); ok {
			d.log.Warn("trigger not fired", "workspace", in.Workspace, "trigger", in.Trigger, "event", evs[0].ID, "error", err)
			return workflows.TriggerStartRunResult{Refused: err.Error()}, nil
		}
		return workflows.TriggerStartRunResult{}, err
	}
	return workflows.TriggerStartRunResult{Run: &workflows.TriggerRunRef{Workspace: in.Workspace, Kind: string(kind), Name: runName}}, nil
}

// gateWaitInterval is how often gateWaitRun looks at a run.
const gateWaitInterval = 2 * time.Second

// gateWaitRun returns once a run the trigger started has ended (or is gone).
func (d *Dispatcher) gateWaitRun(ctx context.Context, run workflows.TriggerRunRef) error {
	for {
		ended, err := d.runEnded(ctx, run)
		switch {
		case errors.Is(err, service.ErrNotFound):
			return nil
		case err == nil && ended:
			return nil
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(gateWaitInterval):
		}
	}
}

// runEnded reports whether a run has reached a terminal phase.
func (d *Dispatcher) runEnded(ctx context.Context, run workflows.TriggerRunRef) (bool, error) {
	switch schemas.Kind(run.Kind) {
	case schemas.KindPipeline:
		p, err := d.pipelines.Get(ctx, run.Workspace, run.Name)
		return err == nil && p.Status.Phase.Terminal(), err
	case schemas.KindExperiment:
		e, err := d.experiments.Get(ctx, run.Workspace, run.Name)
		return err == nil && e.Status.Phase.Terminal(), err
	default:
		j, err := d.jobs.Get(ctx, run.Workspace, run.Name)
		return err == nil && j.Status.Phase.Terminal(), err
	}
}
