package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// scheduleEventsSlack is how far past its bound a schedule run may go: it looks at its
// history between two wake-ups, and one wake-up (a fire: a timer, a child workflow)
// adds a few dozen events at most.
const scheduleEventsSlack = 100

// A schedule fires every 15 minutes for 14 simulated days (10-minute jobs): it
// continues as new at its default bound, no run's history passes that bound by more
// than one wake-up (and every run stays under 10 MB), each run starts with the state
// the previous one carried (as its status query shows), and every nominal time fires
// exactly once across the runs.
func TestScheduleHistoryBoundedOverDays(t *testing.T) {
	start := t0
	end := start.Add(14 * 24 * time.Hour)
	sched := testSchedule(t, func(s *schemas.Schedule) { s.Spec.Cron = "*/15 * * * *" })
	in := workflows.ScheduleInput{Schedule: sched}
	now := start
	type schedRun struct {
		events, bytes int
		first         *workflows.ScheduleView
		carried       *workflows.ScheduleState
	}
	var runs []schedRun
	started := map[string]int{}
	var last workflows.ScheduleView
	for len(runs) < 20 {
		h := newSchedHarness(t, now)
		// A job the previous run started ends 10 minutes after its start, as the fake
		// children do.
		var carried []schemas.ScheduleRun
		if in.State != nil {
			carried = in.State.Running
		}
		onActivity(h.env, scheduleActs.WaitScheduledJob, func(_ context.Context, _ activities.WaitScheduledJobInput) (activities.JobOutcome, error) {
			return activities.JobOutcome{Found: true, Phase: schemas.JobSucceeded}, nil
		}).AfterFn(func() time.Duration {
			if len(carried) != 1 || carried[0].StartTime == nil {
				t.Errorf("carried runs %+v, want one with a start time", carried)
				return 0
			}
			// (At least a second: the test queries the run at its start first.)
			return max(carried[0].StartTime.Add(h.jobDuration).Sub(h.env.Now()), time.Second)
		})
		m := meterHistory(h.env, workflows.ScheduleWorkflowName, in)
		var run schedRun
		if in.State != nil {
			queryAtStart(h.env, workflows.QueryStatus, func(v converter.EncodedValue, err error) {
				run.first = new(workflows.ScheduleView)
				if err == nil {
					err = v.Get(run.first)
				}
				if err != nil {
					t.Errorf("run %d: status query at its start: %v", len(runs), err)
				}
			}, workflows.ScheduleQuery{Next: 1})
		}
		h.at(now, end, func() {
			last = h.query()
			h.env.CancelWorkflow()
		})
		h.env.ExecuteWorkflow(workflows.ScheduleWorkflowName, in)
		for _, s := range h.started {
			started[s.Name]++
		}
		err := h.env.GetWorkflowError()
		if can, ok := errors.AsType[*workflow.ContinueAsNewError](err); ok {
			var next workflows.ScheduleInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			run.carried = next.State
			run.events, run.bytes = m.closed(next)
			runs = append(runs, run)
			in, now = next, h.env.Now()
			continue
		}
		if _, ok := errors.AsType[*temporal.CanceledError](err); !ok {
			t.Fatalf("run %d ended with %v, want cancelled at the end of the test", len(runs), err)
		}
		run.events, run.bytes = m.closed(nil)
		runs = append(runs, run)
		break
	}

	maxEvents, maxBytes := 0, 0
	for i, r := range runs {
		maxEvents, maxBytes = max(maxEvents, r.events), max(maxBytes, r.bytes)
		if r.events >= 10000+scheduleEventsSlack || r.bytes >= historyBytesLimit {
			t.Errorf("run %d: %d events, %d bytes: want under %d events and %d bytes", i, r.events, r.bytes,
				10000+scheduleEventsSlack, historyBytesLimit)
		}
		if i == 0 {
			continue
		}
		prev := runs[i-1].carried
		if r.first == nil || prev == nil {
			t.Errorf("run %d: not queried at its start, or nothing carried", i)
			continue
		}
		got := r.first.Status
		if diff := cmp.Diff(prev.History, got.History); diff != "" || prev.Counts != got.Counts ||
			!prev.CreateTime.Equal(got.CreateTime) || len(prev.Running) != len(got.Running) {
			t.Errorf("run %d: status at its start differs from what run %d carried: counts %+v / %+v, running %d / %d, history (-carried +got):\n%s",
				i, i-1, prev.Counts, got.Counts, len(prev.Running), len(got.Running), diff)
		}
	}
	t.Logf("14 days every 15 minutes: %d runs, at most %d events and %d bytes in one run (metered)", len(runs), maxEvents, maxBytes)
	if len(runs) < 2 {
		t.Fatalf("the schedule never continued as new (%d events)", runs[0].events)
	}
	fires := int(end.Sub(start) / (15 * time.Minute))
	// The last time fires as the test ends, after the last query.
	if len(started) != fires || last.Status.Counts.Started != int64(fires-1) || last.Status.Counts.Skipped != 0 {
		t.Errorf("%d distinct runs started, counts %+v; want %d started, %d counted, none skipped",
			len(started), last.Status.Counts, fires, fires-1)
	}
	for name, n := range started {
		if n != 1 {
			t.Errorf("run %s started %d times", name, n)
		}
	}
}
