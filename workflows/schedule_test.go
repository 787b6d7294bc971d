package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// t0 is a Monday, 1 June 2026 (a 30-day month), 00:00 UTC.
var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// testSchedule returns a valid, defaulted hourly schedule "nightly" of workspace ml whose
// jobs checkpoint to s3://ckpt/nightly, changed by each mutation.
func testSchedule(t *testing.T, mutate ...func(s *schemas.Schedule)) schemas.Schedule {
	t.Helper()
	s := schemas.Schedule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindSchedule,
		Metadata:   schemas.ObjectMeta{Name: "nightly", Workspace: "ml"},
		Spec: schemas.ScheduleSpec{
			Cron: "0 * * * *",
			Action: schemas.ScheduleAction{JobTemplate: &schemas.JobTemplate{
				Metadata: schemas.TemplateMeta{Labels: map[string]string{"team": "ml"}},
				Spec: schemas.TrainingJobSpec{
					Framework:  schemas.FrameworkCustom,
					Command:    []string{"train"},
					Roles:      map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
					Checkpoint: &schemas.CheckpointSpec{URI: "s3://ckpt/nightly"},
				},
			}},
		},
	}
	for _, m := range mutate {
		m(&s)
	}
	s.Default()
	if errs := s.Validate(); errs != nil {
		t.Fatalf("invalid test schedule: %v", errs)
	}
	return s
}

// startedJob is one start of the fake TrainingJob, Experiment or Pipeline workflow.
type startedJob struct {
	Name string
	At   time.Time
	Job  schemas.TrainingJob
	// Experiment and Pipeline are set instead of Job when the run started one.
	Experiment *schemas.Experiment
	Pipeline   *workflows.PipelineInput
}

// schedHarness runs the Schedule workflow in the test environment (time skipping) with
// fake TrainingJob, Experiment and Pipeline children that run for jobDuration, or until
// they are stopped, and records every start.
type schedHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	mu          sync.Mutex
	started     []startedJob
	stops       map[string]bool
	jobDuration time.Duration
	// pollStops makes the fake job look for a stop once a minute, half a minute past it
	// (cancelOther tests).
	pollStops  bool
	views      []workflows.ScheduleView
	updates    int
	updateErrs []func() error
	// failing names the runs whose fake pipeline fails.
	failing map[string]bool
	// published are the messages the schedule published, in order. A publish that
	// starts from natsDown[0] on returns only at natsDown[1] (workflow time), when it
	// starts before that.
	published []events.Msg
	natsDown  [2]time.Time
}

func newSchedHarness(t *testing.T, start time.Time) *schedHarness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	h := &schedHarness{t: t, env: s.NewTestWorkflowEnvironment(), stops: map[string]bool{}, jobDuration: 10 * time.Minute}
	h.env.SetStartTime(start)
	h.env.RegisterWorkflowWithOptions(workflows.ScheduleWorkflow, workflow.RegisterOptions{Name: workflows.ScheduleWorkflowName})
	h.env.RegisterWorkflowWithOptions(h.fakeJob, workflow.RegisterOptions{Name: workflows.TrainingJobWorkflowName})
	h.env.RegisterWorkflowWithOptions(h.fakeExperiment, workflow.RegisterOptions{Name: workflows.ExperimentWorkflowName})
	h.env.RegisterWorkflowWithOptions(h.fakePipeline, workflow.RegisterOptions{Name: workflows.PipelineWorkflowName})
	workers.RegisterScheduleActivities(h.env, &activities.ScheduleActivities{})
	workers.RegisterActivities(h.env, &activities.JobActivities{})
	onActivityErr(h.env, jobActs.PublishEvents, func(_ context.Context, in activities.PublishEventsInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.published = append(h.published, in.Msgs...)
		return nil
	}).AfterFn(func() time.Duration {
		h.mu.Lock()
		defer h.mu.Unlock()
		if now := h.env.Now(); !now.Before(h.natsDown[0]) && now.Before(h.natsDown[1]) {
			return h.natsDown[1].Sub(now)
		}
		return 0
	})
	// Every kind answers its stop update with Stopped: jobs and pipelines once they
	// have ended, experiments once their trials have (they then wait for a resume).
	onActivity(h.env, scheduleActs.StopScheduledJob, func(_ context.Context, in activities.StopScheduledJobInput) (activities.StopScheduledJobResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stops[in.WorkflowID] = true
		return activities.StopScheduledJobResult{Phase: "Stopped"}, nil
	})
	return h
}

// fakeJob stands for the TrainingJob workflow: it records its start, runs for
// jobDuration (or until stopped) and reports a checkpoint named after itself.
func (h *schedHarness) fakeJob(ctx workflow.Context, in workflows.TrainingJobInput) (workflows.TrainingJobResult, error) {
	name := in.Job.Metadata.Name
	stopped, err := h.runFake(ctx, startedJob{Name: name, At: workflow.Now(ctx), Job: in.Job},
		workflows.JobWorkflowID(in.Job.Metadata.Workspace, name))
	switch {
	case err != nil:
		return workflows.TrainingJobResult{}, err
	case stopped:
		return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobStopped, Message: "stopped by request"}}, nil
	}
	return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobSucceeded,
		LastCheckpoint: "s3://ckpt/nightly/" + name}}, nil
}

// fakeExperiment stands for the Experiment workflow: it records its start and runs for
// jobDuration; once stopped it does not end but, like a real experiment, waits for a
// resume (which never comes here).
func (h *schedHarness) fakeExperiment(ctx workflow.Context, in workflows.ExperimentInput) (workflows.ExperimentResult, error) {
	exp := in.Experiment
	stopped, err := h.runFake(ctx, startedJob{Name: exp.Metadata.Name, At: workflow.Now(ctx), Experiment: &exp},
		workflows.ExperimentWorkflowID(exp.Metadata.Workspace, exp.Metadata.Name))
	switch {
	case err != nil:
		return workflows.ExperimentResult{}, err
	case stopped:
		if err := workflow.Sleep(ctx, 7*24*time.Hour); err != nil {
			return workflows.ExperimentResult{}, err
		}
		return workflows.ExperimentResult{Status: schemas.ExperimentStatus{Phase: schemas.ExperimentStopped, Message: "not resumed"}}, nil
	}
	return workflows.ExperimentResult{Status: schemas.ExperimentStatus{Phase: schemas.ExperimentSucceeded, Message: "best trial 3"}}, nil
}

// fakePipeline stands for the Pipeline workflow: it records its start, runs for
// jobDuration or until stopped, and fails when its run is in failing.
func (h *schedHarness) fakePipeline(ctx workflow.Context, in workflows.PipelineInput) (workflows.PipelineResult, error) {
	name := in.Pipeline.Metadata.Name
	stopped, err := h.runFake(ctx, startedJob{Name: name, At: workflow.Now(ctx), Pipeline: &in},
		workflows.PipelineWorkflowID(in.Pipeline.Metadata.Workspace, name))
	h.mu.Lock()
	failing := h.failing[name]
	h.mu.Unlock()
	switch {
	case err != nil:
		return workflows.PipelineResult{}, err
	case stopped:
		return workflows.PipelineResult{Status: schemas.PipelineStatus{Phase: schemas.PipelineStopped, Message: "stopped by request"}}, nil
	case failing:
		return workflows.PipelineResult{Status: schemas.PipelineStatus{Phase: schemas.PipelineFailed, Message: "step train failed"}}, nil
	}
	return workflows.PipelineResult{Status: schemas.PipelineStatus{Phase: schemas.PipelineSucceeded}}, nil
}

// runFake records a fake child's start and runs it for jobDuration, looking for a stop
// of workflow id once a minute (half a minute past it) with pollStops; stopped says
// whether one came.
func (h *schedHarness) runFake(ctx workflow.Context, start startedJob, id string) (stopped bool, err error) {
	h.mu.Lock()
	h.started = append(h.started, start)
	d, poll := h.jobDuration, h.pollStops
	h.mu.Unlock()
	end := workflow.Now(ctx).Add(d)
	for workflow.Now(ctx).Before(end) {
		now := workflow.Now(ctx)
		step := end.Sub(now)
		if poll {
			// Look half a minute past each minute: a schedule fires on whole minutes, and
			// a look at the very instant of a stop sees it or not depending on which timer
			// the test environment fires first.
			next := now.Truncate(time.Minute).Add(30 * time.Second)
			if !next.After(now) {
				next = next.Add(time.Minute)
			}
			step = min(step, next.Sub(now))
		}
		if err := workflow.Sleep(ctx, step); err != nil {
			return false, err
		}
		h.mu.Lock()
		stopped := h.stops[id]
		h.mu.Unlock()
		if stopped {
			return true, nil
		}
	}
	return false, nil
}

// run executes the schedule from the harness' start time until the given time, when it
// is cancelled (a schedule never ends by itself), and checks that it ended that way.
func (h *schedHarness) run(in workflows.ScheduleInput, start, until time.Time) {
	h.t.Helper()
	h.env.RegisterDelayedCallback(func() {
		h.query()
		h.env.CancelWorkflow()
	}, until.Sub(start))
	h.env.ExecuteWorkflow(workflows.ScheduleWorkflowName, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	var canceled *temporal.CanceledError
	if err := h.env.GetWorkflowError(); !errors.As(err, &canceled) {
		h.t.Fatalf("workflow error = %v, want cancelled at the end of the test", err)
	}
}

// at runs fn at time at of the workflow clock.
func (h *schedHarness) at(start, at time.Time, fn func()) {
	h.env.RegisterDelayedCallback(fn, at.Sub(start))
}

// query records the status query's answer.
func (h *schedHarness) query() workflows.ScheduleView {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryStatus, workflows.ScheduleQuery{Next: 3})
	if err != nil {
		h.t.Fatalf("query: %v", err)
	}
	var view workflows.ScheduleView
	if err := v.Get(&view); err != nil {
		h.t.Fatal(err)
	}
	h.views = append(h.views, view)
	return view
}

// lastView is the status at the end of the run.
func (h *schedHarness) lastView() workflows.ScheduleView {
	if len(h.views) == 0 {
		h.t.Fatal("no status recorded")
	}
	return h.views[len(h.views)-1]
}

// update sends an update and fails the test unless it completes.
func (h *schedHarness) update(name string, arg, result any) {
	h.t.Helper()
	var uerr error
	done := false
	h.updates++
	h.env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, h.updates), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { uerr, done = err, true },
		OnComplete: func(v any, err error) {
			done, uerr = true, err
			if err == nil && result != nil {
				// The test environment hands over the handler's Go value.
				b, merr := json.Marshal(v)
				if merr == nil {
					merr = json.Unmarshal(b, result)
				}
				uerr = merr
			}
		},
	}, arg)
	h.updateErrs = append(h.updateErrs, func() error {
		if !done {
			return fmt.Errorf("update %s not completed", name)
		}
		return uerr
	})
}

// names returns the started jobs' names in start order.
func (h *schedHarness) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.started))
	for i, s := range h.started {
		out[i] = s.Name
	}
	return out
}

// startTimes maps each started job to when it started (UTC, RFC 3339).
func (h *schedHarness) startTimes() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for _, s := range h.started {
		out[s.Name] = s.At.UTC().Format(time.RFC3339)
	}
	return out
}

// checkStarts checks that the runs started are those of starts, which maps each
// run (by hour, "HH") to its start time on 2026-06-01 ("HH:MM"); what names the
// kind of run in the message.
func (h *schedHarness) checkStarts(what string, starts map[string]string) {
	h.t.Helper()
	want := map[string]string{}
	for hh, at := range starts {
		if len(at) == len("15:04") {
			at += ":00"
		}
		want[jobName(t0.Add(mustHour(h.t, hh)))] = "2026-06-01T" + at + "Z"
	}
	if diff := cmp.Diff(want, h.startTimes()); diff != "" {
		h.t.Errorf("%s starts (-want +got):\n%s", what, diff)
	}
}

// checkOutcomes checks the outcomes in the schedule's last status, keyed by run hour
// ("HH") or, for runs that never started, by the name the history gives them (with an
// "@"), and returns that status.
func (h *schedHarness) checkOutcomes(byHour map[string]schemas.RunOutcome) schemas.ScheduleStatus {
	h.t.Helper()
	want := map[string]schemas.RunOutcome{}
	for k, o := range byHour {
		if strings.Contains(k, "@") {
			want[k] = o
			continue
		}
		want[jobName(t0.Add(mustHour(h.t, k)))] = o
	}
	st := h.lastView().Status
	if diff := cmp.Diff(want, outcomes(st.History)); diff != "" {
		h.t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	return st
}

// followSucceeded answers every WaitScheduledJob with Succeeded, appending the
// workflow id it was asked to follow to *followed (under h.mu), and returns the mock.
func (h *schedHarness) followSucceeded(followed *[]string) *testsuite.MockCallWrapper {
	return onActivity(h.env, scheduleActs.WaitScheduledJob, func(_ context.Context, in activities.WaitScheduledJobInput) (activities.JobOutcome, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		*followed = append(*followed, in.WorkflowID)
		return activities.JobOutcome{Found: true, Phase: schemas.JobSucceeded}, nil
	})
}

// checkStops checks that stop updates went to exactly the workflows (ids made by
// id) of the runs of the given hours ("HH").
func (h *schedHarness) checkStops(id func(ws, name string) string, hours []string) {
	h.t.Helper()
	var want []string
	for _, hh := range hours {
		want = append(want, id("ml", jobName(t0.Add(mustHour(h.t, hh)))))
	}
	h.mu.Lock()
	got := slices.Sorted(maps.Keys(h.stops))
	h.mu.Unlock()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		h.t.Errorf("stop updates sent to (-want +got):\n%s", diff)
	}
}

// runAction runs the nightly schedule with action and policy from 23:30 to 02:45,
// each run lasting duration and the runs of the hours in failing ("HH") failing;
// it returns the harness and the schedule.
func runAction(t *testing.T, action func(*schemas.Schedule), policy schedule.OverlapPolicy,
	duration time.Duration, failing []string,
) (*schedHarness, schemas.Schedule) {
	t.Helper()
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	h.jobDuration = duration
	h.pollStops = true
	h.failing = map[string]bool{}
	for _, hh := range failing {
		h.failing[jobName(t0.Add(mustHour(t, hh)))] = true
	}
	sched := testSchedule(t, action, func(s *schemas.Schedule) { s.Spec.OverlapPolicy = policy })
	h.run(workflows.ScheduleInput{Schedule: sched}, start, t0.Add(2*time.Hour+45*time.Minute))
	return h, sched
}

// firstRunMeta is the metadata of the first run (at t0) of the nightly schedule.
func firstRunMeta() schemas.ObjectMeta {
	return schemas.ObjectMeta{Name: jobName(t0), Workspace: "ml",
		Labels: map[string]string{"team": "ml", schemas.LabelSchedule: "nightly"},
		Annotations: map[string]string{schemas.AnnotationNominalTime: "2026-06-01T00:00:00Z",
			schemas.AnnotationRunTrigger: string(schemas.TriggerSchedule)}}
}

func jobName(t time.Time) string { return workflows.ScheduledJobName("nightly", t) }

func hours(from time.Time, hs ...int) []string {
	out := make([]string, len(hs))
	for i, n := range hs {
		out[i] = jobName(from.Add(time.Duration(n) * time.Hour))
	}
	return out
}

// outcomes maps each history entry with a job to its outcome, and lists those without.
func outcomes(runs []schemas.ScheduleRun) map[string]schemas.RunOutcome {
	out := map[string]schemas.RunOutcome{}
	for _, r := range runs {
		key := r.Job
		if key == "" {
			key = string(r.Outcome) + "@" + r.NominalTime.UTC().Format("15:04")
		}
		out[key] = r.Outcome
	}
	return out
}

// An hourly schedule over a 30-day month fires exactly 720 times, each at its hour,
// each job once, in order.
func TestScheduleHourlyMonthFires720Times(t *testing.T) {
	start, end := t0.Add(-30*time.Minute), t0.Add(30*24*time.Hour-30*time.Minute)
	h := newSchedHarness(t, start)
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t)}, start, end)

	names := h.names()
	if len(names) != 720 {
		t.Fatalf("%d jobs started in June, want 720", len(names))
	}
	seen := map[string]bool{}
	for i, s := range h.started {
		want := t0.Add(time.Duration(i) * time.Hour)
		if s.Name != jobName(want) || !s.At.Equal(want) {
			t.Fatalf("job %d: %s at %s, want %s at %s", i, s.Name, s.At, jobName(want), want)
		}
		if seen[s.Name] {
			t.Fatalf("job %s started twice", s.Name)
		}
		seen[s.Name] = true
	}
	st := h.lastView().Status
	if st.Counts != (schemas.ScheduleCounts{Started: 720}) {
		t.Errorf("counts = %+v, want 720 started and nothing else", st.Counts)
	}
	if len(st.History) != 50 || st.History[49].Job != jobName(t0.Add(719*time.Hour)) || st.History[49].Outcome != schemas.RunSucceeded {
		t.Errorf("history: %d entries, last %+v; want the latest 50, the last Succeeded", len(st.History), st.History[len(st.History)-1])
	}
	if len(st.Next) != 3 || !st.Next[0].NominalTime.Equal(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("next = %+v, want 3 times from 1 July 00:00", st.Next)
	}
	// The job carries the template and the schedule's marks.
	j := h.started[0].Job
	if j.Metadata.Labels[schemas.LabelSchedule] != "nightly" || j.Metadata.Labels["team"] != "ml" ||
		j.Metadata.Annotations[schemas.AnnotationNominalTime] != "2026-06-01T00:00:00Z" || j.Metadata.Workspace != "ml" {
		t.Errorf("job metadata = %+v", j.Metadata)
	}
}

// Across daylight-saving changes in a named zone no run is doubled or lost: a fixed
// daily time runs once per local day (in the skipped hour at the transition, in the
// repeated hour at its first occurrence), an hourly schedule every 3600 s.
func TestScheduleAcrossDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cron, zone string
		from, to   time.Time
		want       []string // start times, RFC 3339 in the zone
	}{
		"daily 01:30 across fall-back": {
			cron: "30 1 * * *", zone: "America/New_York",
			from: time.Date(2026, 10, 30, 12, 0, 0, 0, ny), to: time.Date(2026, 11, 2, 12, 0, 0, 0, ny),
			want: []string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
		"daily 02:30 across spring-forward": {
			cron: "30 2 * * *", zone: "America/New_York",
			from: time.Date(2026, 3, 6, 12, 0, 0, 0, ny), to: time.Date(2026, 3, 9, 12, 0, 0, 0, ny),
			want: []string{"2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		"Berlin daily 02:30 across fall-back": {
			cron: "30 2 * * *", zone: "Europe/Berlin",
			from: time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 10, 26, 12, 0, 0, 0, time.UTC),
			want: []string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		},
		"hourly across fall-back": {
			cron: "0 * * * *", zone: "America/New_York",
			from: time.Date(2026, 11, 1, 0, 30, 0, 0, ny), to: time.Date(2026, 11, 1, 3, 30, 0, 0, ny),
			want: []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"},
		},
		"hourly across spring-forward": {
			cron: "0 * * * *", zone: "America/New_York",
			from: time.Date(2026, 3, 8, 0, 30, 0, 0, ny), to: time.Date(2026, 3, 8, 4, 30, 0, 0, ny),
			want: []string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			h := newSchedHarness(t, tt.from)
			h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
				s.Spec.Cron, s.Spec.TimeZone = tt.cron, tt.zone
			})}, tt.from, tt.to)
			loc, _ := time.LoadLocation(tt.zone)
			var got []string
			for _, s := range h.started {
				got = append(got, s.At.In(loc).Format(time.RFC3339))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("job starts (-want +got):\n%s", diff)
			}
			if names := h.names(); len(uniq(names)) != len(names) {
				t.Errorf("a job name repeats: %v", names)
			}
		})
	}
	// A whole fall-back day of an hourly schedule: 25 runs, an hour apart.
	h := newSchedHarness(t, time.Date(2026, 10, 31, 23, 30, 0, 0, ny))
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) { s.Spec.TimeZone = "America/New_York" })},
		time.Date(2026, 10, 31, 23, 30, 0, 0, ny), time.Date(2026, 11, 1, 23, 30, 0, 0, ny))
	if len(h.started) != 25 {
		t.Errorf("%d hourly runs on the fall-back day, want 25", len(h.started))
	}
	for i := 1; i < len(h.started); i++ {
		if d := h.started[i].At.Sub(h.started[i-1].At); d != time.Hour {
			t.Errorf("run %d started %s after the previous one", i, d)
		}
	}
}

func uniq(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}

// Each overlap policy, with jobs of 100 minutes on an hourly schedule, from 00:00 to
// 04:30.
func TestScheduleOverlapPolicies(t *testing.T) {
	tests := map[string]struct {
		policy schedule.OverlapPolicy
		// starts maps each started job to its start time (HH:MM).
		starts   map[string]string
		skipped  int
		buffered []string
		stopped  []string
	}{
		// 01:00 and 03:00 find a run running and are dropped.
		"skip": {policy: schedule.Skip,
			starts:  map[string]string{"00": "00:00", "02": "02:00", "04": "04:00"},
			skipped: 2},
		// 01:00 waits and starts when 00:00 ends (01:40); 02:00 waits; 03:00 finds one
		// waiting and is dropped; 02:00 starts at 03:20; 04:00 waits.
		"bufferOne": {policy: schedule.BufferOne,
			starts:  map[string]string{"00": "00:00", "01": "01:40", "02": "03:20"},
			skipped: 1, buffered: []string{"04"}},
		// Nothing is dropped: the runs queue and run one after another.
		"bufferAll": {policy: schedule.BufferAll,
			starts:   map[string]string{"00": "00:00", "01": "01:40", "02": "03:20"},
			buffered: []string{"03", "04"}},
		// Each run stops the previous one and starts once it has stopped.
		"cancelOther": {policy: schedule.CancelOther,
			starts:  map[string]string{"00": "00:00", "01": "01:00:30", "02": "02:00:30", "03": "03:00:30", "04": "04:00:30"},
			stopped: []string{"00", "01", "02", "03"}},
		// Every run starts on time, alongside the others.
		"allowAll": {policy: schedule.AllowAll,
			starts: map[string]string{"00": "00:00", "01": "01:00", "02": "02:00", "03": "03:00", "04": "04:00"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			start := t0.Add(-30 * time.Minute)
			h := newSchedHarness(t, start)
			h.jobDuration = 100 * time.Minute
			h.pollStops = tt.policy == schedule.CancelOther
			h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) { s.Spec.OverlapPolicy = tt.policy })},
				start, t0.Add(4*time.Hour+30*time.Minute))

			h.checkStarts("job", tt.starts)
			if len(h.started) != len(uniq(h.names())) {
				t.Errorf("a job started twice: %v", h.names())
			}
			st := h.lastView().Status
			if st.Counts.Skipped != int64(tt.skipped) {
				t.Errorf("skipped %d, want %d", st.Counts.Skipped, tt.skipped)
			}
			var buffered []string
			for _, b := range st.Buffered {
				buffered = append(buffered, b.NominalTime.UTC().Format("15"))
			}
			if diff := cmp.Diff(tt.buffered, buffered); diff != "" {
				t.Errorf("buffered (-want +got):\n%s", diff)
			}
			var stopped []string
			for _, r := range st.History {
				if r.Outcome == schemas.RunStopped {
					stopped = append(stopped, r.NominalTime.UTC().Format("15"))
				}
			}
			if diff := cmp.Diff(tt.stopped, stopped); diff != "" {
				t.Errorf("stopped runs (-want +got):\n%s", diff)
			}
		})
	}
}

func mustHour(t *testing.T, hh string) time.Duration {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(hh, "%d", &n); err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * time.Hour
}

// After 5.5 hours of downtime with a 2-hour catch-up window, exactly the runs whose time
// lies in the window fire, once each, as soon as the schedule runs again; the older ones
// are recorded as missed. The downtime is the one a worker restart leaves: the state
// from before it (cursor at 00:00) and a clock at 05:30 — exactly what the workflow sees
// when its next task runs late.
func TestScheduleCatchupAfterDowntime(t *testing.T) {
	back := t0.Add(5*time.Hour + 30*time.Minute)
	h := newSchedHarness(t, back)
	in := workflows.ScheduleInput{
		Schedule: testSchedule(t, func(s *schemas.Schedule) {
			s.Spec.CatchupWindow = schemas.Duration(2 * time.Hour)
			s.Spec.OverlapPolicy = schedule.AllowAll
		}),
		State: &workflows.ScheduleState{CreateTime: t0.Add(-time.Hour), Cursor: t0},
	}
	h.run(in, back, t0.Add(6*time.Hour+30*time.Minute))

	want := map[string]string{
		jobName(t0.Add(4 * time.Hour)): "2026-06-01T05:30:00Z", // 1h30 late: in the window
		jobName(t0.Add(5 * time.Hour)): "2026-06-01T05:30:00Z", // 30m late
		jobName(t0.Add(6 * time.Hour)): "2026-06-01T06:00:00Z", // on time again
	}
	if diff := cmp.Diff(want, h.startTimes()); diff != "" {
		t.Errorf("job starts (-want +got):\n%s", diff)
	}
	st := h.lastView().Status
	if st.Counts.Missed != 3 || st.Counts.Started != 3 {
		t.Errorf("counts = %+v, want 3 missed (01:00, 02:00, 03:00) and 3 started", st.Counts)
	}
	triggers := map[string]schemas.RunTrigger{}
	var missed []string
	for _, r := range st.History {
		if r.Outcome == schemas.RunMissed {
			missed = append(missed, r.NominalTime.UTC().Format("15:04"))
		} else {
			triggers[r.NominalTime.UTC().Format("15:04")] = r.Trigger
		}
	}
	if diff := cmp.Diff([]string{"01:00", "02:00", "03:00"}, missed); diff != "" {
		t.Errorf("missed (-want +got):\n%s", diff)
	}
	wantTriggers := map[string]schemas.RunTrigger{"04:00": schemas.TriggerCatchup, "05:00": schemas.TriggerCatchup, "06:00": schemas.TriggerSchedule}
	if diff := cmp.Diff(wantTriggers, triggers); diff != "" {
		t.Errorf("triggers (-want +got):\n%s", diff)
	}
}

// The same from inside a running schedule: the data check of the 01:00 run hangs for
// 5.5 hours (an S3 outage); when it returns, the 01:00 run starts, and of the times that
// passed meanwhile only those in the 2-hour window fire.
func TestScheduleCatchupAfterAStall(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	returnActivity(h.env, scheduleActs.CheckNewData, activities.CheckNewDataResult{Found: true}, nil).After(5*time.Hour + 30*time.Minute).Once()
	returnActivity(h.env, scheduleActs.CheckNewData, activities.CheckNewDataResult{Found: true}, nil)
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.CatchupWindow = schemas.Duration(2 * time.Hour)
		s.Spec.OverlapPolicy = schedule.AllowAll
		s.Spec.RunOptions.SkipIfNoNewDataUnder = "s3://datasets/clicks/"
	})}, start, t0.Add(7*time.Hour+30*time.Minute))

	want := map[string]string{
		jobName(t0):                    "2026-06-01T00:00:00Z", // the first run needs no data check
		jobName(t0.Add(time.Hour)):     "2026-06-01T06:30:00Z", // its check returned 5.5 h late
		jobName(t0.Add(5 * time.Hour)): "2026-06-01T06:30:00Z", // 1.5 h late: in the window
		jobName(t0.Add(6 * time.Hour)): "2026-06-01T06:30:00Z",
		jobName(t0.Add(7 * time.Hour)): "2026-06-01T07:00:00Z",
	}
	if diff := cmp.Diff(want, h.startTimes()); diff != "" {
		t.Errorf("job starts (-want +got):\n%s", diff)
	}
	if st := h.lastView().Status; st.Counts.Missed != 3 {
		t.Errorf("missed %d, want 3 (02:00, 03:00, 04:00)", st.Counts.Missed)
	}
}

// Pause stops scheduled runs (times passing while paused are not caught up); resume
// starts them again; the status shows the pause and its note.
func TestSchedulePauseResume(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	var paused, resumed workflows.ScheduleView
	h.at(start, t0.Add(90*time.Minute), func() {
		h.update(workflows.UpdateSchedulePause, workflows.PauseScheduleRequest{Note: "data migration"}, &paused)
	})
	h.at(start, t0.Add(3*time.Hour), func() { h.query() })
	h.at(start, t0.Add(4*time.Hour+30*time.Minute), func() {
		h.update(workflows.UpdateScheduleResume, workflows.ResumeScheduleRequest{}, &resumed)
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t)}, start, t0.Add(6*time.Hour+30*time.Minute))
	h.checkUpdates()

	if diff := cmp.Diff(hours(t0, 0, 1, 5, 6), h.names()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	during := h.views[0].Status
	if !during.Paused || during.PauseNote != "data migration" || len(during.Next) != 0 || !h.views[0].Schedule.Spec.Paused {
		t.Errorf("status while paused = paused %v note %q next %v", during.Paused, during.PauseNote, during.Next)
	}
	if !paused.Status.Paused || resumed.Status.Paused || resumed.Status.PauseNote != "" {
		t.Errorf("update answers: paused %v, resumed %v %q", paused.Status.Paused, resumed.Status.Paused, resumed.Status.PauseNote)
	}
	if next := resumed.Status.Next; len(next) == 0 || !next[0].NominalTime.Equal(t0.Add(5*time.Hour)) {
		t.Errorf("next after resume = %+v, want 05:00 first", next)
	}
}

// Trigger runs the action now under the schedule's overlap policy unless the request
// overrides it; triggering twice in the same second starts one job.
func TestScheduleTrigger(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	h.jobDuration = 100 * time.Minute
	var skipped, first, again workflows.TriggerScheduleResult
	h.at(start, t0.Add(10*time.Minute), func() {
		h.update(workflows.UpdateScheduleTrigger, workflows.TriggerScheduleRequest{}, &skipped)
	})
	h.at(start, t0.Add(20*time.Minute), func() {
		h.update(workflows.UpdateScheduleTrigger, workflows.TriggerScheduleRequest{OverlapPolicy: schedule.AllowAll}, &first)
		h.update(workflows.UpdateScheduleTrigger, workflows.TriggerScheduleRequest{OverlapPolicy: schedule.AllowAll}, &again)
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t)}, start, t0.Add(50*time.Minute))
	h.checkUpdates()

	if skipped.Run.Outcome != schemas.RunSkipped || skipped.Run.Trigger != schemas.TriggerManual {
		t.Errorf("trigger while a run runs (skip policy) = %+v, want Skipped", skipped.Run)
	}
	manual := jobName(t0.Add(20 * time.Minute))
	if first.Run.Job != manual || first.Run.Outcome != schemas.RunRunning || again.Run.Job != manual {
		t.Errorf("triggers = %+v and %+v, want both %s", first.Run, again.Run, manual)
	}
	if diff := cmp.Diff([]string{jobName(t0), manual}, h.names()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if h.started[1].Job.Metadata.Annotations[schemas.AnnotationRunTrigger] != string(schemas.TriggerManual) {
		t.Errorf("annotations = %v", h.started[1].Job.Metadata.Annotations)
	}
}

// Backfill runs each nominal time of [from, to) once, one after another; a second,
// overlapping backfill runs only the times not run yet; the range ignores pause.
func TestScheduleBackfill(t *testing.T) {
	h := newSchedHarness(t, t0)
	h.jobDuration = 30 * time.Minute
	var first, second workflows.BackfillScheduleResult
	h.at(t0, t0.Add(5*time.Minute), func() {
		h.update(workflows.UpdateSchedulePause, workflows.PauseScheduleRequest{}, nil)
		h.update(workflows.UpdateScheduleBackfill, workflows.BackfillScheduleRequest{From: t0.Add(-5 * time.Hour), To: t0.Add(-2 * time.Hour)}, &first)
	})
	h.at(t0, t0.Add(3*time.Hour), func() {
		h.update(workflows.UpdateScheduleBackfill, workflows.BackfillScheduleRequest{From: t0.Add(-4 * time.Hour), To: t0.Add(-time.Hour)}, &second)
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t)}, t0, t0.Add(4*time.Hour))
	h.checkUpdates()

	want := map[string]string{
		jobName(t0.Add(-5 * time.Hour)): "2026-06-01T00:05:00Z",
		jobName(t0.Add(-4 * time.Hour)): "2026-06-01T00:35:00Z",
		jobName(t0.Add(-3 * time.Hour)): "2026-06-01T01:05:00Z",
		jobName(t0.Add(-2 * time.Hour)): "2026-06-01T03:00:00Z",
	}
	if diff := cmp.Diff(want, h.startTimes()); diff != "" {
		t.Errorf("job starts (-want +got):\n%s", diff)
	}
	if len(h.started) != 4 {
		t.Errorf("%d jobs started, want 4: %v", len(h.started), h.names())
	}
	var firstOutcomes, secondOutcomes []schemas.RunOutcome
	for _, r := range first.Runs {
		firstOutcomes = append(firstOutcomes, r.Outcome)
	}
	for _, r := range second.Runs {
		secondOutcomes = append(secondOutcomes, r.Outcome)
	}
	if diff := cmp.Diff([]schemas.RunOutcome{"Running", "Buffered", "Buffered"}, firstOutcomes); diff != "" {
		t.Errorf("first backfill (-want +got):\n%s", diff)
	}
	// -4h and -3h ran already (their records are returned), -2h starts.
	if diff := cmp.Diff([]schemas.RunOutcome{"Succeeded", "Succeeded", "Running"}, secondOutcomes); diff != "" {
		t.Errorf("second backfill (-want +got):\n%s", diff)
	}
}

// A time fired before is never fired again even when the schedule's own record of it is
// gone (history limit 1, or lost state): Temporal refuses a second job with the same
// workflow id, and the schedule follows the existing job instead.
func TestScheduleAlreadyFiredIsNotFiredAgain(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	returnActivity(h.env, scheduleActs.WaitScheduledJob, activities.JobOutcome{Found: true, Phase: schemas.JobSucceeded, LastCheckpoint: "s3://ckpt/nightly/x"}, nil)
	var res workflows.BackfillScheduleResult
	h.at(start, t0.Add(2*time.Hour+30*time.Minute), func() {
		h.update(workflows.UpdateScheduleBackfill, workflows.BackfillScheduleRequest{From: t0, To: t0.Add(time.Hour + time.Second),
			OverlapPolicy: schedule.AllowAll}, &res)
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.HistoryLimit = 1
		s.Spec.OverlapPolicy = schedule.AllowAll
	})}, start, t0.Add(2*time.Hour+45*time.Minute))
	h.checkUpdates()

	if diff := cmp.Diff(hours(t0, 0, 1, 2), h.names()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("backfill runs = %+v", res.Runs)
	}
	for _, r := range res.Runs {
		if r.Outcome != schemas.RunRunning || r.StartTime != nil || r.Message == "" {
			t.Errorf("backfill of a fired time = %+v, want Running (followed), not started, with a message", r)
		}
	}
	st := h.lastView().Status
	if len(st.History) != 1 || st.History[0].Outcome != schemas.RunSucceeded || len(st.Running) != 0 {
		t.Errorf("history %+v running %+v", st.History, st.Running)
	}
}

// With resumeFromPreviousCheckpoint each run starts from the checkpoint the previous run
// recorded; with skipIfNoNewDataUnder a run whose data check finds nothing new is
// skipped, and the next check still looks from the last run that started.
func TestScheduleRunOptions(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	var since []time.Time
	var mu sync.Mutex
	found := []bool{false, true}
	onActivity(h.env, scheduleActs.CheckNewData, func(_ context.Context, in activities.CheckNewDataInput) (activities.CheckNewDataResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if in.URI != "s3://datasets/clicks/" {
			return activities.CheckNewDataResult{}, fmt.Errorf("checked %s", in.URI)
		}
		since = append(since, in.Since)
		f := found[0]
		found = append(found[1:], true)
		return activities.CheckNewDataResult{Found: f, Key: "clicks/part-1"}, nil
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.RunOptions = schemas.ScheduleRunOptions{ResumeFromPreviousCheckpoint: true, SkipIfNoNewDataUnder: "s3://datasets/clicks/"}
	})}, start, t0.Add(2*time.Hour+30*time.Minute))

	if diff := cmp.Diff(hours(t0, 0, 2), h.names()); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	if got := h.started[0].Job.Spec.Checkpoint.ResumeFrom; got != "" {
		t.Errorf("first run resumes from %q, want a fresh start", got)
	}
	if got, want := h.started[1].Job.Spec.Checkpoint.ResumeFrom, "s3://ckpt/nightly/"+jobName(t0); got != want {
		t.Errorf("second run resumes from %q, want %q", got, want)
	}
	if diff := cmp.Diff([]time.Time{t0, t0}, since); diff != "" {
		t.Errorf("data checked since (-want +got):\n%s", diff)
	}
	st := h.lastView().Status
	o := outcomes(st.History)
	if o["NoNewData@01:00"] != schemas.RunNoNewData || st.Counts.NoNewData != 1 {
		t.Errorf("history %v counts %+v, want 01:00 NoNewData", o, st.Counts)
	}
	if st.LastCheckpoint != "s3://ckpt/nightly/"+jobName(t0.Add(2*time.Hour)) {
		t.Errorf("last checkpoint %q", st.LastCheckpoint)
	}
	for _, r := range st.History {
		if r.Job == jobName(t0.Add(2*time.Hour)) && r.ResumedFrom != "s3://ckpt/nightly/"+jobName(t0) {
			t.Errorf("history of the 02:00 run says resumed from %q", r.ResumedFrom)
		}
	}
}

// A spec update takes effect at once: a new expression moves the next fire time; name
// and workspace cannot change.
func TestScheduleUpdateSpec(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	var view workflows.ScheduleView
	h.at(start, t0.Add(70*time.Minute), func() {
		h.update(workflows.UpdateScheduleSpec, workflows.UpdateScheduleRequest{Schedule: testSchedule(t, func(s *schemas.Schedule) {
			s.Spec.Cron = "30 * * * *"
		})}, &view)
	})
	rejected := false
	h.at(start, t0.Add(75*time.Minute), func() {
		h.env.UpdateWorkflow(workflows.UpdateScheduleSpec, "rename", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("a rename was accepted") },
			OnReject:   func(error) { rejected = true },
			OnComplete: func(any, error) {},
		}, workflows.UpdateScheduleRequest{Schedule: testSchedule(t, func(s *schemas.Schedule) { s.Metadata.Name = "other" })})
	})
	h.run(workflows.ScheduleInput{Schedule: testSchedule(t)}, start, t0.Add(3*time.Hour))
	h.checkUpdates()

	want := []string{jobName(t0), jobName(t0.Add(time.Hour)), jobName(t0.Add(90 * time.Minute)), jobName(t0.Add(150 * time.Minute))}
	if diff := cmp.Diff(want, h.names()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if view.Schedule.Spec.Cron != "30 * * * *" || !rejected {
		t.Errorf("update answered cron %q; rename rejected %v", view.Schedule.Spec.Cron, rejected)
	}
}

// With jitter, each run starts at its nominal time plus a fixed offset below the jitter,
// which the status shows in advance; the job keeps the nominal time's name.
func TestScheduleJitter(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	s := testSchedule(t, func(s *schemas.Schedule) { s.Spec.Cron = "@daily"; s.Spec.Jitter = schemas.Duration(10 * time.Minute) })
	var before workflows.ScheduleView
	h.at(start, t0.Add(-time.Minute), func() { before = h.query() })
	h.run(workflows.ScheduleInput{Schedule: s}, start, t0.Add(3*24*time.Hour-time.Hour))
	times, err := s.Times()
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range h.started {
		nominal := t0.Add(time.Duration(i) * 24 * time.Hour)
		if j.Name != jobName(nominal) || !j.At.Equal(times.FireTime(nominal)) || j.At.Sub(nominal) >= 10*time.Minute {
			t.Errorf("run %d: %s at %s; nominal %s, fire time %s", i, j.Name, j.At, nominal, times.FireTime(nominal))
		}
	}
	if len(h.started) != 3 {
		t.Errorf("%d runs in 3 days", len(h.started))
	}
	if n := before.Status.Next; len(n) != 3 || !n[0].FireTime.Equal(times.FireTime(t0)) || !n[0].NominalTime.Equal(t0) {
		t.Errorf("next before the first run = %+v", n)
	}
}

// The workflow continues as new when Temporal suggests it, carrying its state: the next
// run follows the jobs still running through an activity, keeps the history, and fires
// neither them nor their times again.
func TestScheduleContinueAsNew(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	h.jobDuration = 90 * time.Minute
	h.at(start, t0.Add(90*time.Minute), func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(workflows.ScheduleWorkflowName, workflows.ScheduleInput{Schedule: testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.OverlapPolicy = schedule.AllowAll
		s.Spec.RunOptions.ResumeFromPreviousCheckpoint = true
	})})
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	var next workflows.ScheduleInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if can.WorkflowType.Name != workflows.ScheduleWorkflowName || next.State == nil {
		t.Fatalf("continued as %s with state %v", can.WorkflowType.Name, next.State)
	}
	var running []string
	for _, r := range next.State.Running {
		running = append(running, r.Job)
	}
	// At 01:30 the 00:00 run ends, which wakes the workflow: it continues as new with the
	// 01:00 run still running.
	if diff := cmp.Diff(hours(t0, 1), running); diff != "" || !next.State.Cursor.Equal(t0.Add(time.Hour)) {
		t.Fatalf("carried running (-want +got):\n%s\ncursor %s", diff, next.State.Cursor)
	}

	// The next run: the carried job's end is learnt through the activity (at 01:50), then
	// 02:00 fires, resuming from that job's checkpoint, and 03:00 fires.
	restart := t0.Add(90 * time.Minute)
	h2 := newSchedHarness(t, restart)
	var followed []string
	var mu sync.Mutex
	onActivity(h2.env, scheduleActs.WaitScheduledJob, func(_ context.Context, in activities.WaitScheduledJobInput) (activities.JobOutcome, error) {
		mu.Lock()
		followed = append(followed, in.WorkflowID)
		mu.Unlock()
		return activities.JobOutcome{Found: true, Phase: schemas.JobSucceeded, LastCheckpoint: "s3://ckpt/nightly/from-" + in.WorkflowID}, nil
	}).After(20 * time.Minute)
	h2.run(next, restart, t0.Add(3*time.Hour+30*time.Minute))

	carried := workflows.JobWorkflowID("ml", jobName(t0.Add(time.Hour)))
	if diff := cmp.Diff([]string{carried}, followed); diff != "" {
		t.Errorf("followed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(hours(t0, 2, 3), h2.names()); diff != "" {
		t.Errorf("jobs after continue-as-new (-want +got):\n%s", diff)
	}
	if got := h2.started[0].Job.Spec.Checkpoint.ResumeFrom; got != "s3://ckpt/nightly/from-"+carried {
		t.Errorf("02:00 resumes from %q, want the carried 01:00 run's checkpoint", got)
	}
	o := outcomes(h2.lastView().Status.History)
	for _, name := range hours(t0, 0, 1) {
		if o[name] != schemas.RunSucceeded {
			t.Errorf("%s: %s after continue-as-new, want Succeeded (history %v)", name, o[name], o)
		}
	}
}

// checkUpdates fails the test for every update that did not complete without error.
func (h *schedHarness) checkUpdates() {
	h.t.Helper()
	for _, f := range h.updateErrs {
		if err := f(); err != nil {
			h.t.Errorf("update: %v", err)
		}
	}
}

// experimentAction makes a schedule's runs experiments tuning lr of a one-replica job.
func experimentAction(s *schemas.Schedule) {
	lrMin, lrMax := 0.001, 1.0
	s.Spec.Action = schemas.ScheduleAction{ExperimentTemplate: &schemas.ExperimentTemplate{
		Metadata: schemas.TemplateMeta{Labels: map[string]string{"team": "ml"}},
		Spec: schemas.ExperimentSpec{
			SearchSpace: []schemas.ParameterSpec{{Name: "lr", Type: schemas.ParameterFloat, Min: &lrMin, Max: &lrMax, Log: true}},
			Objective:   schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize},
			MaxTrials:   4,
			TrialTemplate: schemas.TrainingJobSpec{
				Framework: schemas.FrameworkCustom,
				Command:   []string{"train", "--lr", "${params.lr}"},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			},
		},
	}}
}

// pipelineAction makes a schedule's runs one-step pipelines with a parameter the
// template gives and one left to its default.
func pipelineAction(s *schemas.Schedule) {
	key := "clicks/latest"
	s.Spec.Action = schemas.ScheduleAction{PipelineTemplate: &schemas.PipelineTemplate{
		Metadata: schemas.TemplateMeta{Labels: map[string]string{"team": "ml"}},
		Params:   map[string]string{"threshold": "0.9"},
		Spec: schemas.PipelineSpec{
			Params: []schemas.PipelineParam{{Name: "threshold"}, {Name: "dataKey", Default: &key}},
			Steps: []schemas.PipelineStep{{Name: "train", Job: &schemas.TrainingJobSpec{
				Framework: schemas.FrameworkCustom,
				Command:   []string{"train", "--data", "${params.dataKey}"},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			}}},
		},
	}}
}

// runKinds maps each history entry with a run to its kind.
func runKinds(runs []schemas.ScheduleRun) map[string]schemas.Kind {
	out := map[string]schemas.Kind{}
	for _, r := range runs {
		if r.Job != "" {
			out[r.Job] = r.Kind
		}
	}
	return out
}

// A schedule of experiments starts each run as a child Experiment workflow named like a
// job, with the template's spec and the schedule's label and annotations, and records
// how it ended. With cancelOther a running experiment is stopped through its stop update;
// since a stopped experiment waits for a resume rather than end, its answer Stopped ends
// the run and the next one starts at once.
func TestScheduleExperimentAction(t *testing.T) {
	tests := map[string]actionCase{
		"each ends by itself": {policy: schedule.Skip, duration: 30 * time.Minute,
			starts: map[string]string{"00": "00:00", "01": "01:00", "02": "02:00"},
			outcomes: map[string]schemas.RunOutcome{
				"00": schemas.RunSucceeded, "01": schemas.RunSucceeded, "02": schemas.RunSucceeded}},
		"skip while one runs": {policy: schedule.Skip, duration: 100 * time.Minute,
			starts: map[string]string{"00": "00:00", "02": "02:00"},
			outcomes: map[string]schemas.RunOutcome{
				"00": schemas.RunSucceeded, "02": schemas.RunRunning, "Skipped@01:00": schemas.RunSkipped}},
		"cancelOther stops the running one": cancelOtherCase("01:00", "02:00"),
	}
	experimentMeta := func(s startedJob) *schemas.ObjectMeta {
		if s.Experiment == nil {
			return nil
		}
		return &s.Experiment.Metadata
	}
	runActionCases(t, "experiment", experimentAction, experimentMeta, workflows.ExperimentWorkflowID, tests,
		func(t *testing.T, h *schedHarness, sched schemas.Schedule, st schemas.ScheduleStatus) {
			first := h.started[0].Experiment
			if diff := cmp.Diff(sched.Spec.Action.ExperimentTemplate.Spec, first.Spec); diff != "" {
				t.Errorf("experiment spec (-template +got):\n%s", diff)
			}
			if first.Kind != schemas.KindExperiment || first.APIVersion != schemas.APIVersion {
				t.Errorf("experiment kind %q version %q", first.Kind, first.APIVersion)
			}
			for job, k := range runKinds(st.History) {
				if k != schemas.KindExperiment {
					t.Errorf("run %s has kind %q, want Experiment", job, k)
				}
			}
		})
}

// actionCase is one case of a schedule whose action is an experiment or a pipeline:
// the overlap policy, how long each run lasts, the runs (by hour, "HH") that fail, the
// runs started (by hour) with their start times ("HH:MM"), the outcomes (see
// checkOutcomes) and the runs stopped by cancelOther.
type actionCase struct {
	policy   schedule.OverlapPolicy
	duration time.Duration
	failing  []string
	starts   map[string]string
	outcomes map[string]schemas.RunOutcome
	stopped  []string
}

// cancelOtherCase is the cancelOther case: runs lasting 100 minutes, each stopped by
// the next, which starts at start01 and start02 ("HH:MM") once the previous has ended;
// the last still runs.
func cancelOtherCase(start01, start02 string) actionCase {
	return actionCase{policy: schedule.CancelOther, duration: 100 * time.Minute,
		starts: map[string]string{"00": "00:00", "01": start01, "02": start02},
		outcomes: map[string]schemas.RunOutcome{
			"00": schemas.RunStopped, "01": schemas.RunStopped, "02": schemas.RunRunning},
		stopped: []string{"00", "01"}}
}

// runActionCases runs each case with action and checks the runs started (each one of
// kind what: meta gives its metadata, nil for another kind), the first run's metadata,
// the outcomes and the stop updates sent (to the workflows named by id), then what
// check checks of that kind of run.
func runActionCases(t *testing.T, what string, action func(*schemas.Schedule), meta func(startedJob) *schemas.ObjectMeta,
	id func(ws, name string) string,
	tests map[string]actionCase,
	check func(t *testing.T, h *schedHarness, sched schemas.Schedule, st schemas.ScheduleStatus),
) {
	t.Helper()
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			h, sched := runAction(t, action, tt.policy, tt.duration, tt.failing)
			h.checkStarts(what, tt.starts)
			for _, s := range h.started {
				if meta(s) == nil {
					t.Fatalf("run %s: started %+v, want a run of kind %s", s.Name, s, what)
				}
			}
			if diff := cmp.Diff(firstRunMeta(), *meta(h.started[0])); diff != "" {
				t.Errorf("%s metadata (-want +got):\n%s", what, diff)
			}
			st := h.checkOutcomes(tt.outcomes)
			check(t, h, sched, st)
			h.checkStops(id, tt.stopped)
		})
	}
}

// A schedule of pipelines starts each run as a child Pipeline workflow named like a job,
// with the template's spec and parameters (defaults filled in) and the schedule's label,
// and records each run's end: Succeeded, Failed, or Stopped by cancelOther once the
// pipeline's workflow has ended.
func TestSchedulePipelineAction(t *testing.T) {
	tests := map[string]actionCase{
		"succeeded and failed": {policy: schedule.Skip, duration: 30 * time.Minute, failing: []string{"01"},
			starts: map[string]string{"00": "00:00", "01": "01:00", "02": "02:00"},
			outcomes: map[string]schemas.RunOutcome{
				"00": schemas.RunSucceeded, "01": schemas.RunFailed, "02": schemas.RunSucceeded}},
		"bufferOne waits for the running one": {policy: schedule.BufferOne, duration: 100 * time.Minute,
			starts:   map[string]string{"00": "00:00", "01": "01:40"},
			outcomes: map[string]schemas.RunOutcome{"00": schemas.RunSucceeded, "01": schemas.RunRunning}},
		// The pipeline ends half a minute after its stop (the fake looks once a minute,
		// half a minute past it); the next run starts when it has.
		"cancelOther stops the running one": cancelOtherCase("01:00:30", "02:00:30"),
	}
	pipelineMeta := func(s startedJob) *schemas.ObjectMeta {
		if s.Pipeline == nil {
			return nil
		}
		return &s.Pipeline.Pipeline.Metadata
	}
	runActionCases(t, "pipeline", pipelineAction, pipelineMeta, workflows.PipelineWorkflowID, tests,
		func(t *testing.T, h *schedHarness, sched schemas.Schedule, st schemas.ScheduleStatus) {
			first := h.started[0].Pipeline
			if diff := cmp.Diff(sched.Spec.Action.PipelineTemplate.Spec, first.Pipeline.Spec); diff != "" {
				t.Errorf("pipeline spec (-template +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"threshold": "0.9", "dataKey": "clicks/latest"}, first.Params); diff != "" {
				t.Errorf("pipeline params (-want +got):\n%s", diff)
			}
			for _, r := range st.History {
				if r.Kind != schemas.KindPipeline {
					t.Errorf("run %s has kind %q, want Pipeline", r.Job, r.Kind)
				}
				if r.Outcome == schemas.RunFailed && r.Message != "step train failed" {
					t.Errorf("failed run %s: message %q, want the pipeline's", r.Job, r.Message)
				}
			}
		})
}

// A time already fired as an experiment or a pipeline is not fired again: Temporal
// refuses a second child with the same workflow id, and the schedule follows the
// existing run (by the workflow id of its kind) instead.
func TestScheduleActionAlreadyFired(t *testing.T) {
	tests := map[string]struct {
		action func(*schemas.Schedule)
		id     func(ws, name string) string
	}{
		"experiment": {action: experimentAction, id: workflows.ExperimentWorkflowID},
		"pipeline":   {action: pipelineAction, id: workflows.PipelineWorkflowID},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			start := t0.Add(-30 * time.Minute)
			h := newSchedHarness(t, start)
			var followed []string
			h.followSucceeded(&followed)
			var res workflows.BackfillScheduleResult
			h.at(start, t0.Add(90*time.Minute), func() {
				h.update(workflows.UpdateScheduleBackfill, workflows.BackfillScheduleRequest{From: t0, To: t0.Add(time.Second),
					OverlapPolicy: schedule.AllowAll}, &res)
			})
			h.run(workflows.ScheduleInput{Schedule: testSchedule(t, tt.action, func(s *schemas.Schedule) {
				s.Spec.HistoryLimit = 1
				s.Spec.OverlapPolicy = schedule.AllowAll
			})}, start, t0.Add(105*time.Minute))
			h.checkUpdates()

			if diff := cmp.Diff(hours(t0, 0, 1), h.names()); diff != "" {
				t.Errorf("runs started (-want +got):\n%s", diff)
			}
			if len(res.Runs) != 1 || res.Runs[0].Outcome != schemas.RunRunning || res.Runs[0].StartTime != nil ||
				!strings.HasPrefix(res.Runs[0].Message, "already fired: a "+name+" with this name exists") {
				t.Errorf("backfill of a fired time = %+v, want Running (followed), not started", res.Runs)
			}
			if diff := cmp.Diff([]string{tt.id("ml", jobName(t0))}, followed); diff != "" {
				t.Errorf("followed (-want +got):\n%s", diff)
			}
		})
	}
}

// Runs carried across continue-as-new are followed by the workflow id of their kind; a
// run recorded before runs had kinds is a job.
func TestScheduleFollowsCarriedRunsOfEveryKind(t *testing.T) {
	start := t0
	h := newSchedHarness(t, start)
	var followed []string
	h.followSucceeded(&followed).After(10 * time.Minute)
	running := []schemas.ScheduleRun{
		{NominalTime: t0.Add(-3 * time.Hour), Job: jobName(t0.Add(-3 * time.Hour)), Outcome: schemas.RunRunning},
		{NominalTime: t0.Add(-2 * time.Hour), Kind: schemas.KindExperiment, Job: jobName(t0.Add(-2 * time.Hour)), Outcome: schemas.RunRunning},
		{NominalTime: t0.Add(-time.Hour), Kind: schemas.KindPipeline, Job: jobName(t0.Add(-time.Hour)), Outcome: schemas.RunRunning},
	}
	h.run(workflows.ScheduleInput{
		Schedule: testSchedule(t, func(s *schemas.Schedule) { s.Spec.Paused = true }),
		State:    &workflows.ScheduleState{CreateTime: t0.Add(-4 * time.Hour), Cursor: t0, Running: running, History: running},
	}, start, t0.Add(30*time.Minute))

	want := []string{
		workflows.ExperimentWorkflowID("ml", jobName(t0.Add(-2*time.Hour))),
		workflows.JobWorkflowID("ml", jobName(t0.Add(-3*time.Hour))),
		workflows.PipelineWorkflowID("ml", jobName(t0.Add(-time.Hour))),
	}
	slices.Sort(followed)
	if diff := cmp.Diff(want, followed); diff != "" {
		t.Errorf("followed (-want +got):\n%s", diff)
	}
	st := h.lastView().Status
	if len(st.Running) != 0 || len(h.started) != 0 {
		t.Errorf("running %+v, started %v", st.Running, h.names())
	}
	for _, r := range st.History {
		if r.Outcome != schemas.RunSucceeded {
			t.Errorf("carried run %s (%s): %s, want Succeeded", r.Job, r.Kind, r.Outcome)
		}
	}
}

// A run of a schedule whose action is an experiment or a pipeline starts it.
func TestScheduleStartsExperimentAndPipelineActions(t *testing.T) {
	tests := map[string]func(*schemas.Schedule){
		"experiment": experimentAction,
		"pipeline":   pipelineAction,
	}
	for name, action := range tests {
		t.Run(name, func(t *testing.T) {
			start := t0.Add(-30 * time.Minute)
			h := newSchedHarness(t, start)
			h.run(workflows.ScheduleInput{Schedule: testSchedule(t, action)}, start, t0.Add(5*time.Minute))

			if len(h.started) != 1 {
				t.Errorf("%d runs started, want 1", len(h.started))
			}
			st := h.lastView().Status
			if len(st.History) != 1 || st.History[0].Outcome != schemas.RunRunning {
				t.Fatalf("history %+v, want one run %s", st.History, schemas.RunRunning)
			}
		})
	}
}
