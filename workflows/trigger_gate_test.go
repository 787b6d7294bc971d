package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// gateEnv is a test environment with the gate's activities faked: start records the
// batch and answers a job named after its first event; wait takes waitFor.
type gateEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	batches [][]string
	starts  []time.Time
}

func newGateEnv(t *testing.T, waitFor time.Duration) *gateEnv {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	g := &gateEnv{env: s.NewTestWorkflowEnvironment()}
	workers.RegisterWorkflows(g.env)
	g.env.RegisterActivityWithOptions(func(_ context.Context, in workflows.TriggerStartRunInput) (workflows.TriggerStartRunResult, error) {
		var ids []string
		for _, e := range in.Batch.Events {
			ids = append(ids, e.ID)
		}
		g.batches = append(g.batches, ids)
		g.starts = append(g.starts, g.env.Now())
		return workflows.TriggerStartRunResult{Run: &workflows.TriggerRunRef{Workspace: in.Workspace, Kind: "TrainingJob", Name: "run-" + ids[0]}}, nil
	}, activity.RegisterOptions{Name: workflows.ActivityTriggerStartRun})
	g.env.RegisterActivityWithOptions(func(_ context.Context, _ workflows.TriggerRunRef) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityTriggerWaitRun})
	// A run ends waitFor after it started.
	g.env.OnActivity(workflows.ActivityTriggerWaitRun, mock.Anything, mock.Anything).After(waitFor).Return(nil)
	return g
}

// signal sends event id with controls c at offset d.
func (g *gateEnv) signal(d time.Duration, id string, c workflows.TriggerControls) {
	g.env.RegisterDelayedCallback(func() {
		g.env.SignalWorkflow(workflows.SignalTriggerEvent, workflows.TriggerGateEvent{ID: id, Params: map[string]string{"id": id}, Controls: c})
	}, d)
}

func (g *gateEnv) state(t *testing.T) workflows.TriggerGateState {
	t.Helper()
	v, err := g.env.QueryWorkflow(workflows.QueryTriggerGate)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.TriggerGateState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// Events within the debounce window start one run with all of them, each once; the
// next event opens the next window.
func TestTriggerGateDebounce(t *testing.T) {
	g := newGateEnv(t, 0)
	c := workflows.TriggerControls{Debounce: 10 * time.Second}
	for i, at := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, 9 * time.Second} {
		id := fmt.Sprint("e", min(i, 3)) // e3 twice: a repeat
		g.signal(at, id, c)
	}
	g.signal(15*time.Second, "e9", c)
	var mid workflows.TriggerGateState
	g.env.RegisterDelayedCallback(func() { mid = g.state(t) }, 5*time.Second)
	g.env.RegisterDelayedCallback(g.env.CancelWorkflow, time.Minute)
	g.env.ExecuteWorkflow(workflows.TriggerGateWorkflowName, workflows.TriggerGateState{Workspace: "ml", Trigger: "t"})

	want := [][]string{{"e0", "e1", "e2", "e3"}, {"e9"}}
	if !slices.EqualFunc(g.batches, want, slices.Equal) {
		t.Errorf("batches %v, want %v", g.batches, want)
	}
	if mid.Window == nil || len(mid.Window.Events) != 4 || mid.Started != 0 {
		t.Errorf("state at 5s: window %+v, started %d; want the open window of 4 events", mid.Window, mid.Started)
	}
}

// With maxConcurrentRuns 1 and overflow queue, runs start one after the other ends; with
// drop, what comes while one runs is dropped.
func TestTriggerGateMaxConcurrent(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprint("drop=", drop), func(t *testing.T) {
			g := newGateEnv(t, 10*time.Second)
			c := workflows.TriggerControls{MaxConcurrent: 1, Drop: drop}
			for i := range 3 {
				g.signal(time.Second+time.Duration(i)*time.Millisecond, fmt.Sprint("e", i), c)
			}
			var st workflows.TriggerGateState
			g.env.RegisterDelayedCallback(func() { st = g.state(t) }, 50*time.Second)
			g.env.RegisterDelayedCallback(g.env.CancelWorkflow, time.Minute)
			g.env.ExecuteWorkflow(workflows.TriggerGateWorkflowName, workflows.TriggerGateState{Workspace: "ml", Trigger: "t"})
			t.Logf("batches %v started at %v; dropped %d", g.batches, g.starts, st.DroppedCount)
			if drop {
				if len(g.batches) != 1 || st.DroppedCount != 2 || len(st.Dropped) != 2 || st.Dropped[0].FirstEvent != "e1" {
					t.Errorf("batches %v, state %+v: want e0 started, e1 and e2 dropped", g.batches, st)
				}
				return
			}
			if len(g.batches) != 3 || st.Started != 3 || len(st.Queue) != 0 {
				t.Fatalf("batches %v, state %+v: want 3 runs", g.batches, st)
			}
			for i := 1; i < 3; i++ {
				if g.starts[i].Sub(g.starts[i-1]) < 10*time.Second {
					t.Errorf("run %d started %s after run %d, before it ended", i, g.starts[i].Sub(g.starts[i-1]), i-1)
				}
			}
		})
	}
}

// A rate limit of 2 runs a minute starts the third event's run a minute after the
// first's.
func TestTriggerGateRateLimit(t *testing.T) {
	g := newGateEnv(t, 0)
	c := workflows.TriggerControls{RateRuns: 2, RatePeriod: time.Minute}
	for i := range 3 {
		g.signal(time.Second+time.Duration(i)*time.Second, fmt.Sprint("e", i), c)
	}
	g.env.RegisterDelayedCallback(g.env.CancelWorkflow, 5*time.Minute)
	g.env.ExecuteWorkflow(workflows.TriggerGateWorkflowName, workflows.TriggerGateState{Workspace: "ml", Trigger: "t"})
	if len(g.starts) != 3 || g.starts[2].Sub(g.starts[0]) < time.Minute || g.starts[1].Sub(g.starts[0]) > 5*time.Second {
		t.Errorf("starts %v: want two at once and the third a minute after the first", g.starts)
	}
}

// After 500 events the gate continues as new, carrying what it has seen and counted;
// an event sent again in the next run starts nothing.
func TestTriggerGateContinuesAsNew(t *testing.T) {
	g := newGateEnv(t, 0)
	for i := range 500 {
		g.signal(time.Second+time.Duration(i)*time.Millisecond, fmt.Sprint("e", i), workflows.TriggerControls{MaxConcurrent: 100})
	}
	g.env.ExecuteWorkflow(workflows.TriggerGateWorkflowName, workflows.TriggerGateState{Workspace: "ml", Trigger: "t"})
	var can *workflow.ContinueAsNewError
	if err := g.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("gate ended with %v, want continue-as-new", err)
	}
	var carried workflows.TriggerGateState
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &carried); err != nil {
		t.Fatal(err)
	}
	if carried.Events != 500 || carried.Started != 500 || len(carried.Seen) != 500 || carried.Workspace != "ml" || carried.Trigger != "t" {
		t.Errorf("carried %d events, %d started, %d seen, %s/%s", carried.Events, carried.Started, len(carried.Seen), carried.Workspace, carried.Trigger)
	}

	// The next run: a repeat starts nothing; its running runs are waited for again.
	g2 := newGateEnv(t, 0)
	g2.signal(time.Second, "e7", workflows.TriggerControls{})
	g2.signal(2*time.Second, "e500", workflows.TriggerControls{})
	g2.env.RegisterDelayedCallback(g2.env.CancelWorkflow, time.Minute)
	g2.env.ExecuteWorkflow(workflows.TriggerGateWorkflowName, carried)
	if want := [][]string{{"e500"}}; !slices.EqualFunc(g2.batches, want, slices.Equal) {
		t.Errorf("batches after continuing %v, want %v", g2.batches, want)
	}
}
