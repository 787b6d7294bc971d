package workflows_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// runEvents decodes the schedule run events h published, checking each message's
// subject, id and envelope.
func (h *schedHarness) runEvents(firstSeq int) []events.ScheduleRunData {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []events.ScheduleRunData
	for i, m := range h.published {
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			h.t.Fatal(err)
		}
		var d events.ScheduleRunData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			h.t.Fatal(err)
		}
		if ev.Type != events.TypeScheduleRun || m.Subject != events.ScheduleRunSubject("ml", "nightly") ||
			ev.Source != events.ScheduleSource("ml", "nightly") || ev.Subject != "nightly" || ev.Workspace != "ml" {
			h.t.Errorf("event %d: type %s on %s, source %s, subject %s, workspace %s", i, ev.Type, m.Subject, ev.Source, ev.Subject, ev.Workspace)
		}
		if want := firstSeq + i; d.Seq != want || m.ID != ev.ID || ev.ID != fmt.Sprintf("%s:run:%d", d.UID, want) {
			h.t.Errorf("event %d: seq %d, message id %s, event id %s, uid %q; want seq %d, id <uid>:run:%d", i, d.Seq, m.ID, ev.ID, d.UID, want, want)
		}
		out = append(out, d)
	}
	return out
}

// runEventLines renders events as "HH action outcome target".
func runEventLines(evs []events.ScheduleRunData) []string {
	var out []string
	for _, d := range evs {
		out = append(out, fmt.Sprintf("%s %s %s %s %s", d.ScheduledTime.UTC().Format("15"), d.Action, d.Outcome, d.Trigger, d.Target))
	}
	return out
}

// A schedule publishes one run event each time it records what became of a run: each
// start, each run the overlap policy skips, each end it sees, numbered from 1; and
// across continue-as-new the numbering carries on (the outbox is emptied first).
func TestScheduleRunEvents(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	h.jobDuration = 90 * time.Minute
	h.at(start, t0.Add(150*time.Minute), func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(workflows.ScheduleWorkflowName, workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.OverlapPolicy = schedule.Skip
	})})
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	var next workflows.ScheduleInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	job := func(hh int) string { return jobName(t0.Add(time.Duration(hh) * time.Hour)) }
	// 00:00 starts and runs until 01:30, so 01:00 is skipped; 02:00 starts, so 03:00 is
	// skipped, and then (continue-as-new was suggested at 02:30) the schedule continues as
	// new with 02:00 running.
	want := []string{
		"00 Started Running Schedule " + job(0),
		"01 Skipped Skipped Schedule ",
		"00 Finished Succeeded Schedule " + job(0),
		"02 Started Running Schedule " + job(2),
		"03 Skipped Skipped Schedule ",
	}
	first := h.runEvents(1)
	if diff := cmp.Diff(want, runEventLines(first)); diff != "" {
		t.Fatalf("run events before continue-as-new (-want +got):\n%s", diff)
	}
	if next.State == nil || next.State.EventSeq != len(want) {
		t.Fatalf("carried state %+v: want eventSeq %d", next.State, len(want))
	}
	for _, d := range first {
		if d.Kind != string(schemas.KindTrainingJob) || d.Schedule != "nightly" {
			t.Errorf("event %d: kind %q, schedule %q", d.Seq, d.Kind, d.Schedule)
		}
		switch d.Action {
		case "Started":
			if d.StartTime == nil {
				t.Errorf("event %d: a started run without startTime", d.Seq)
			}
		case "Finished", "Skipped":
			if d.FinishTime == nil {
				t.Errorf("event %d: a %s run without finishTime", d.Seq, d.Action)
			}
		}
	}
	if d := first[2]; d.Checkpoint != "s3://ckpt/nightly/"+job(0) {
		t.Errorf("finished run's checkpoint %q", d.Checkpoint)
	}

	// The next run carries the uid and the numbering on: 02:00 ends (learnt by the
	// activity), 04:00 starts. (The test environment has no first run id: the uid the
	// state carries is set here.)
	next.State.UID = "nightly-uid"
	restart := t0.Add(3 * time.Hour)
	h2 := newSchedHarness(t, restart)
	h2.jobDuration = 90 * time.Minute
	var followed []string
	h2.followSucceeded(&followed).After(10 * time.Minute)
	h2.run(next, restart, t0.Add(4*time.Hour+30*time.Minute))
	want2 := []string{
		"02 Finished Succeeded Schedule " + job(2),
		"04 Started Running Schedule " + job(4),
	}
	second := h2.runEvents(len(want) + 1)
	if diff := cmp.Diff(want2, runEventLines(second)); diff != "" {
		t.Errorf("run events after continue-as-new (-want +got):\n%s", diff)
	}
	for _, d := range second {
		if d.UID != "nightly-uid" {
			t.Errorf("event %d after continue-as-new has uid %q, not the carried one", d.Seq, d.UID)
		}
	}
}

// Runs missed during a downtime, caught up, and buffered by the overlap policy each have
// their event, in the order the schedule recorded them.
func TestScheduleRunEventsOfMissedCaughtUpAndBufferedRuns(t *testing.T) {
	job := func(hh int) string { return jobName(t0.Add(time.Duration(hh) * time.Hour)) }
	t.Run("catchup", func(t *testing.T) {
		// As TestScheduleCatchupAfterDowntime: back at 05:30 with a 2-hour window.
		back := t0.Add(5*time.Hour + 30*time.Minute)
		h := newSchedHarness(t, back)
		h.run(workflows.ScheduleInput{
			Schedule: testSchedule(t, func(s *schemas.Schedule) {
				s.Spec.CatchupWindow = schemas.Duration(2 * time.Hour)
				s.Spec.OverlapPolicy = schedule.AllowAll
			}),
			State: &workflows.ScheduleState{CreateTime: t0.Add(-time.Hour), Cursor: t0},
		}, back, t0.Add(6*time.Hour+5*time.Minute))
		want := []string{
			"01 Missed Missed Schedule ", "02 Missed Missed Schedule ", "03 Missed Missed Schedule ",
			"04 Started Running Catchup " + job(4), "05 Started Running Catchup " + job(5),
			"04 Finished Succeeded Catchup " + job(4), "05 Finished Succeeded Catchup " + job(5),
			"06 Started Running Schedule " + job(6),
		}
		if diff := cmp.Diff(want, runEventLines(h.runEvents(1))); diff != "" {
			t.Errorf("run events (-want +got):\n%s", diff)
		}
	})
	t.Run("bufferOne", func(t *testing.T) {
		// As TestScheduleOverlapPolicies: 01:00 waits for 00:00 (100 minutes) and
		// starts at 01:40; 02:00 waits; 03:00 finds one waiting and is dropped.
		start := t0.Add(-30 * time.Minute)
		h := newSchedHarness(t, start)
		h.jobDuration = 100 * time.Minute
		h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) { s.Spec.OverlapPolicy = schedule.BufferOne })},
			start, t0.Add(3*time.Hour+10*time.Minute))
		want := []string{
			"00 Started Running Schedule " + job(0),
			"01 Buffered Buffered Schedule " + job(1),
			"00 Finished Succeeded Schedule " + job(0),
			"01 Started Running Schedule " + job(1),
			"02 Buffered Buffered Schedule " + job(2),
			"03 Skipped Skipped Schedule ",
		}
		if diff := cmp.Diff(want, runEventLines(h.runEvents(1))); diff != "" {
			t.Errorf("run events (-want +got):\n%s", diff)
		}
	})
}

// While NATS is down the schedule's run events wait in its outbox: the schedule does
// not continue as new with events unpublished, and it keeps firing on time meanwhile;
// once they are published it continues as new at once.
func TestScheduleContinuesAsNewOnlyOnceItsRunEventsArePublished(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	back := t0.Add(4*time.Hour + 20*time.Minute)
	h.natsDown = [2]time.Time{t0.Add(2*time.Hour + 20*time.Minute), back}
	h.at(start, t0.Add(2*time.Hour+30*time.Minute), func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(workflows.ScheduleWorkflowName, workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.OverlapPolicy = schedule.AllowAll
	})})
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if now := h.env.Now(); now.Before(back) || now.After(back.Add(time.Minute)) {
		t.Errorf("continued as new at %s, want once the events were published (%s)", now, back)
	}
	var next workflows.ScheduleInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	// 03:00 and 04:00 fired on time while the events could not be published.
	want := map[string]string{}
	var lines []string
	for hh := range 5 {
		nominal := t0.Add(time.Duration(hh) * time.Hour)
		want[jobName(nominal)] = nominal.Format(time.RFC3339)
		lines = append(lines, fmt.Sprintf("%02d Started Running Schedule %s", hh, jobName(nominal)),
			fmt.Sprintf("%02d Finished Succeeded Schedule %s", hh, jobName(nominal)))
	}
	if diff := cmp.Diff(want, h.startTimes()); diff != "" {
		t.Errorf("job starts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lines, runEventLines(h.runEvents(1))); diff != "" {
		t.Errorf("run events (-want +got):\n%s", diff)
	}
	if next.State == nil || next.State.EventSeq != len(lines) || !next.State.Cursor.Equal(t0.Add(4*time.Hour)) {
		t.Errorf("carried state: eventSeq %d, cursor %s; want %d, 04:00", next.State.EventSeq, next.State.Cursor, len(lines))
	}
}
