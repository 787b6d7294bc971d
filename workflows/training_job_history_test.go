package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Bounds every run of a chain must stay under (Temporal terminates a workflow at
// 51,200 events or 50 MB).
const (
	historyEventsLimit = 10000
	historyBytesLimit  = 10 << 20
)

// gangSim plays a gang of n replicas over simulated weeks, on the workflow clock: each
// attempt's replicas start 8 a minute after its launch, attempt k < len(failAt) loses
// one replica (exit code 1) at start+failAt[k], and the last attempt's replicas all
// succeed at end.
type gangSim struct {
	n      int
	start  time.Time
	end    time.Time
	failAt []time.Duration

	mu       sync.Mutex
	launched map[int]time.Time
}

func (s *gangSim) launch(attempt int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.launched[attempt]; !ok {
		s.launched[attempt] = now
	}
}

func (s *gangSim) startOf(attempt, i int) time.Time {
	return s.launched[attempt].Add(time.Duration(i/8+1) * time.Minute)
}

// state is the gang of attempt at now.
func (s *gangSim) state(attempt int, now time.Time) []schemas.ReplicaStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := backend.GangRef{Job: "wf", Attempt: attempt}
	out := make([]schemas.ReplicaStatus, s.n)
	failing := -1
	if attempt < len(s.failAt) && !now.Before(s.start.Add(s.failAt[attempt])) {
		failing = (7*attempt + 3) % s.n
	}
	for i := range out {
		r := schemas.ReplicaStatus{Name: ref.ReplicaName("worker", i), Role: "worker", Index: i, Phase: schemas.ReplicaPending}
		if st := s.startOf(attempt, i); !now.Before(st) {
			r.Phase, r.Node, r.StartTime = schemas.ReplicaRunning, fmt.Sprintf("node-%03d", (i*7+attempt*13)%200), &st
		}
		switch {
		case i == failing:
			r.Phase, r.ExitCode, r.Message = schemas.ReplicaFailed, code(1), "CUDA error: an illegal memory access was encountered"
		case attempt >= len(s.failAt) && !now.Before(s.end):
			r.Phase, r.ExitCode = schemas.ReplicaSucceeded, code(0)
		}
		out[i] = r
	}
	return out
}

// untilChange is how long after now attempt's gang next changes.
func (s *gangSim) untilChange(attempt int, now time.Time) time.Duration {
	s.mu.Lock()
	next := []time.Time{s.end}
	if attempt < len(s.failAt) {
		next = append(next, s.start.Add(s.failAt[attempt]))
	}
	for i := 0; i < s.n; i += 8 {
		next = append(next, s.startOf(attempt, i))
	}
	s.mu.Unlock()
	d := time.Duration(1<<63 - 1)
	for _, t := range next {
		if t.After(now) {
			d = min(d, t.Sub(now))
		}
	}
	return d
}

// mock makes the job's gang activities play sim in h's environment, metered by m.
func (s *gangSim) mock(h *harness, m *historyMeter) {
	onActivity(h.env, jobActs.LaunchGang, func(_ context.Context, in activities.LaunchGangInput) (activities.LaunchGangResult, error) {
		now := h.env.Now()
		s.launch(in.Params.Ref.Attempt, now)
		return activities.LaunchGangResult{Replicas: s.state(in.Params.Ref.Attempt, now)}, nil
	})
	// Like the real activity, a watch returns when the gang differs from what the
	// workflow knows, or after MaxWait.
	onActivity(h.env, jobActs.WatchGang, func(_ context.Context, in activities.WatchGangInput) (activities.WatchGangResult, error) {
		return activities.WatchGangResult{Replicas: s.state(in.Ref.Attempt, h.env.Now())}, nil
	}).AfterFn(func() time.Duration {
		in, _ := m.input(workflows.ActivityWatchGang).(activities.WatchGangInput)
		return max(min(in.MaxWait, s.untilChange(in.Ref.Attempt, h.env.Now())), 0)
	})
	returnActivityErr(h.env, jobActs.StopGang, nil)
}

// chainRun is what one run of a chain left.
type chainRun struct {
	events, bytes int
	view          workflows.JobView
	// view is the status the run ended with, and first the status it answered at
	// its start.
	first *workflows.JobView
}

// A 64-replica job runs for 30 simulated days, losing a replica every 3 days (each a
// restart on a new attempt): it continues as new whenever its history reaches its
// bound, every run's history stays under 10,000 events and 10 MB, and the status query,
// the attempt history and the status events go on across the runs.
func TestTrainingJob30DaysBoundedHistory(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sim := &gangSim{n: 64, start: start, end: start.Add(30 * 24 * time.Hour), launched: map[int]time.Time{}}
	for k := range 9 {
		sim.failAt = append(sim.failAt, time.Duration(k+1)*72*time.Hour+time.Duration(k)*time.Hour)
	}
	job := testJob()
	job.Spec.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 64}}
	job.Spec.FaultTolerance.MaxRestarts = 20

	in := workflows.TrainingJobInput{Job: job}
	now := start
	var runs []chainRun
	var phases, ids []string
	var result schemas.JobStatus
	for len(runs) < 200 {
		h := newHarness(t)
		h.env.SetStartTime(now)
		m := meterHistory(h.env, workflows.TrainingJobWorkflowName, in)
		sim.mock(h, m)
		var run chainRun
		if in.Continued != nil {
			queryAtStart(h.env, workflows.QueryStatus, func(v converter.EncodedValue, err error) {
				run.first = new(workflows.JobView)
				if err == nil {
					err = v.Get(run.first)
				}
				if err != nil {
					t.Errorf("run %d: status query at its start: %v", len(runs), err)
				}
			})
		}
		h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, in)
		if err := h.env.GetWorkflowError(); err != nil && !errors.As(err, new(*workflow.ContinueAsNewError)) {
			t.Fatalf("run %d: %v", len(runs), err)
		}
		if !h.env.IsWorkflowCompleted() {
			t.Fatalf("run %d did not complete", len(runs))
		}
		phases, ids = append(phases, h.phases...), append(ids, h.ids...)
		var can *workflow.ContinueAsNewError
		if err := h.env.GetWorkflowError(); errors.As(err, &can) {
			var next workflows.TrainingJobInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if can.WorkflowType.Name != workflows.TrainingJobWorkflowName || next.Continued == nil {
				t.Fatalf("run %d continued as %s with %+v", len(runs), can.WorkflowType.Name, next.Continued)
			}
			// The status a run answers is what it hands over (the test environment
			// answers no query once a run has ended).
			run.view = workflows.JobView{UID: next.Continued.UID, Job: next.Job, Status: next.Continued.Status}
			run.events, run.bytes = m.closed(next)
			runs = append(runs, run)
			in, now = next, h.env.Now()
			continue
		}
		result = h.result(t)
		run.events, run.bytes = m.closed(workflows.TrainingJobResult{Status: result})
		runs = append(runs, run)
		break
	}

	maxEvents, maxBytes := 0, 0
	for i, r := range runs {
		maxEvents, maxBytes = max(maxEvents, r.events), max(maxBytes, r.bytes)
		if r.events >= historyEventsLimit || r.bytes >= historyBytesLimit {
			t.Errorf("run %d: %d events, %d bytes: want under %d events and %d bytes", i, r.events, r.bytes, historyEventsLimit, historyBytesLimit)
		}
		if i == 0 {
			continue
		}
		// The new run answers the status query with what the previous one ended with,
		// and the uid stays the first run's.
		prev := runs[i-1].view
		if r.first == nil {
			t.Errorf("run %d: not queried at its start", i)
		} else if diff := cmp.Diff(prev, *r.first); diff != "" {
			t.Errorf("run %d: status at its start differs from run %d's last (-prev +got):\n%s", i, i-1, diff)
		}
	}
	t.Logf("30 days, 64 replicas: %d runs, at most %d events and %d bytes in one run (metered)", len(runs), maxEvents, maxBytes)
	if len(runs) < 2 {
		t.Fatalf("the job never continued as new (%d events, %d bytes)", runs[0].events, runs[0].bytes)
	}

	if result.Phase != schemas.JobSucceeded || result.Restarts != len(sim.failAt) {
		t.Fatalf("status %s/%s, %d restarts, want Succeeded after %d", result.Phase, result.Reason, result.Restarts, len(sim.failAt))
	}
	if !result.FinishTime.Equal(sim.end) {
		t.Errorf("finished at %s, want %s", result.FinishTime, sim.end)
	}
	// The attempt history survives every continue-as-new.
	if len(result.Attempts) != len(sim.failAt)+1 {
		t.Fatalf("%d attempts recorded, want %d", len(result.Attempts), len(sim.failAt)+1)
	}
	for k, a := range result.Attempts {
		want := schemas.JobRestarting
		if k == len(sim.failAt) {
			want = schemas.JobSucceeded
		}
		if a.Attempt != k || a.Outcome != want || a.RunningTime == nil || a.EndTime == nil {
			t.Errorf("attempt %d: %+v, want attempt %d ending %s", k, a, k, want)
		}
		if k < len(sim.failAt) && (a.Replica != fmt.Sprintf("wf-worker-%d-a%d", (7*k+3)%64, k) || a.FaultTime == nil ||
			!a.FaultTime.Equal(start.Add(sim.failAt[k]))) {
			t.Errorf("attempt %d: failed replica %s at %v, want wf-worker-%d-a%d at %s", k, a.Replica, a.FaultTime,
				(7*k+3)%64, k, start.Add(sim.failAt[k]))
		}
	}
	// Status events: each phase once, in order, numbered without a gap across runs.
	want := []string{"Pending", "Launching", "Running"}
	for range sim.failAt {
		want = append(want, "Restarting", "Launching", "Running")
	}
	want = append(want, "Succeeded")
	if diff := cmp.Diff(want, phases); diff != "" {
		t.Errorf("published phases (-want +got):\n%s", diff)
	}
	for i, id := range ids {
		seq, err := strconv.Atoi(id[strings.LastIndex(id, ":")+1:])
		if err != nil || seq != i+1 || !strings.HasPrefix(id, runs[0].view.UID+":status:") {
			t.Errorf("event %d has id %s, want %s:status:%d", i, id, runs[0].view.UID, i+1)
		}
	}
	if len(result.Timeline) != len(want) {
		t.Errorf("timeline has %d entries, want %d", len(result.Timeline), len(want))
	}
}
