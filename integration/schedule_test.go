package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// scheduleDoc is a schedule whose runs are a one-replica job that prints its name.
func scheduleDoc(ws, name, cron, extra string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: %s, workspace: %s}
spec:
  cron: %q
  catchupWindow: 1m
%s
  action:
    jobTemplate:
      metadata: {labels: {purpose: schedule-test}}
      spec:
        framework: custom
        command: [sh, -c, 'echo "run $DLC_JOB"']
        roles: {worker: {replicas: 1}}
`, name, ws, cron, extra))
}

// waitSchedule polls a schedule until cond holds, failing the test at ctx's deadline.
func waitSchedule(t *testing.T, ctx context.Context, c *dlc.Client, ws, name, what string, cond func(*api.ScheduleView) bool) *api.ScheduleView {
	t.Helper()
	var last *api.ScheduleView
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("schedule %s/%s to become %s", ws, name, what), func() error {
		s, err := c.GetSchedule(ctx, ws, name, 3)
		if err != nil {
			return fmt.Errorf("last status %+v (err %w)", last, err)
		}
		if last = s; !cond(s) {
			return fmt.Errorf("last status %+v", s)
		}
		return nil
	}, 200*time.Millisecond)
	return last
}

// A schedule (@every 2s) fires jobs on the embedded stack that really run and succeed;
// trigger runs one now; a backfill runs each earlier time once, and again runs none;
// pause and resume answer with the state; delete removes the schedule and leaves its
// jobs.
func TestScheduleFiresJobsThatSucceed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	created := time.Now()
	s, err := c.CreateSchedule(ctx, scheduleDoc(ws, "tick", "@every 2s", "  overlapPolicy: allowAll"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if s.Spec.Spec.OverlapPolicy != schedule.AllowAll || s.Spec.Spec.TimeZone != "UTC" {
		t.Errorf("created spec = %+v", s.Spec.Spec)
	}
	if _, err := c.CreateSchedule(ctx, scheduleDoc(ws, "tick", "@every 2s", "")); apiStatus(err) != 409 {
		t.Errorf("second create = %v, want 409", err)
	}

	st := waitSchedule(t, ctx, c, ws, "tick", "ran two jobs", func(s *api.ScheduleView) bool { return itest.SucceededRuns(s.Status) >= 2 })
	for _, r := range st.Status.History {
		if r.Outcome != schemas.RunSucceeded {
			continue
		}
		j, err := c.GetJob(ctx, ws, r.Job)
		if err != nil {
			t.Fatalf("job %s of the history: %v", r.Job, err)
		}
		if j.Status.Phase != schemas.JobSucceeded || j.Spec.Metadata.Labels[schemas.LabelSchedule] != "tick" ||
			j.Spec.Metadata.Annotations[schemas.AnnotationNominalTime] != r.NominalTime.UTC().Format(time.RFC3339) {
			t.Errorf("job %s: %s, labels %v, annotations %v", r.Job, j.Status.Phase, j.Spec.Metadata.Labels, j.Spec.Metadata.Annotations)
		}
		if r.NominalTime.Unix()%2 != 0 || r.StartTime == nil || r.StartTime.Before(r.NominalTime) {
			t.Errorf("run %+v: nominal time not on the 2 s grid, or started before it", r)
		}
	}
	if len(st.Status.Next) != 3 || st.Status.Next[1].NominalTime.Sub(st.Status.Next[0].NominalTime) != 2*time.Second {
		t.Errorf("next = %+v, want 3 times 2 s apart", st.Status.Next)
	}

	// Pause: no next time; trigger still runs the action.
	p, err := c.PauseSchedule(ctx, ws, "tick", "testing pause")
	if err != nil || !p.Status.Paused || p.Status.PauseNote != "testing pause" || len(p.Status.Next) != 0 {
		t.Fatalf("pause = %+v, %v", p, err)
	}
	if l, err := c.ListSchedules(ctx, ws, 0, ""); err != nil || len(l.Items) != 1 || l.Items[0].Name != "tick" ||
		l.Items[0].Cron != "@every 2s" {
		t.Errorf("list = %+v, %v", l, err)
	}
	tr, err := c.TriggerSchedule(ctx, ws, "tick", "")
	// A trigger's nominal time is its second; in a second the schedule itself fired (a
	// 2 s grid), the trigger answers with that run rather than start a second job.
	if err != nil || tr.Run.Job != workflows.ScheduledJobName("tick", tr.Run.NominalTime) ||
		(tr.Run.Trigger != schemas.TriggerManual && tr.Run.NominalTime.Unix()%2 != 0) {
		t.Fatalf("trigger = %+v, %v", tr, err)
	}
	if j, err := c.WaitJob(ctx, ws, tr.Run.Job, 100*time.Millisecond, nil); err != nil || j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("triggered job: %+v, %v", j, err)
	}

	// Backfill four times before the schedule existed, then the same range again.
	from := created.Add(-10 * time.Second).Truncate(2 * time.Second)
	to := from.Add(8 * time.Second)
	b, err := c.BackfillSchedule(ctx, ws, "tick", from, to, schedule.AllowAll)
	if err != nil || len(b.Runs) != 4 {
		t.Fatalf("backfill = %+v, %v; want 4 runs", b, err)
	}
	for _, r := range b.Runs {
		if r.Outcome != schemas.RunRunning || r.Trigger != schemas.TriggerBackfill {
			t.Errorf("backfill run %+v", r)
		}
		if j, err := c.WaitJob(ctx, ws, r.Job, 100*time.Millisecond, nil); err != nil || j.Status.Phase != schemas.JobSucceeded {
			t.Errorf("backfilled job %s: %+v, %v", r.Job, j, err)
		}
	}
	again, err := c.BackfillSchedule(ctx, ws, "tick", from, to, "")
	if err != nil || len(again.Runs) != 4 {
		t.Fatalf("second backfill = %+v, %v", again, err)
	}
	for i, r := range again.Runs {
		// The same run, not a new one (its end may not have reached the schedule yet).
		first := b.Runs[i]
		if r.Job != first.Job || r.StartTime == nil || first.StartTime == nil || !r.StartTime.Equal(*first.StartTime) ||
			(r.Outcome != schemas.RunRunning && r.Outcome != schemas.RunSucceeded) {
			t.Errorf("second backfill run %+v, want the first's run %+v", r, first)
		}
	}
	if _, err := c.BackfillSchedule(ctx, ws, "tick", to, from, ""); apiStatus(err) != 400 {
		t.Errorf("backfill of an empty range = %v, want 400", err)
	}

	r, err := c.ResumeSchedule(ctx, ws, "tick")
	if err != nil || r.Status.Paused || len(r.Status.Next) == 0 {
		t.Fatalf("resume = %+v, %v", r, err)
	}
	final, err := c.PauseSchedule(ctx, ws, "tick", "")
	if err != nil {
		t.Fatal(err)
	}
	waitSchedule(t, ctx, c, ws, "tick", "finished its runs", func(s *api.ScheduleView) bool { return len(s.Status.Running) == 0 })

	// Every started run is one job, listed once under the schedule's label.
	want := itest.StartedRuns(final.Status)
	var listed map[string]int
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("the %d started runs listed under the schedule's label", len(want)), func() error {
		if listed = itest.ListedJobs(t, ctx, c, ws, schemas.LabelSchedule+"="+"tick"); len(listed) < len(want) {
			return fmt.Errorf("listed %v", listed)
		}
		return nil
	}, 200*time.Millisecond)
	for job := range want {
		if listed[job] != 1 {
			t.Errorf("job %s listed %d times, want once", job, listed[job])
		}
	}
	recordHistory(t, ctx, workflows.ScheduleWorkflowID(ws, "tick"), "schedule_every_2s.json")

	if err := c.DeleteSchedule(ctx, ws, "tick"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.GetSchedule(ctx, ws, "tick", 0); !dlc.IsNotFound(err) {
		t.Errorf("get after delete = %v, want 404", err)
	}
	if j, err := c.GetJob(ctx, ws, tr.Run.Job); err != nil || j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("a job of the deleted schedule: %v, %v", j, err)
	}
}

// A schedule of pipelines (@every 3s, allowAll) on the embedded stack: each fire starts
// one Pipeline run named like a job, labelled with the schedule (as are its steps'
// jobs), whose one step reports a metric and succeeds; the schedule records each run's
// kind and its end. Paused after the first run, every run it started is one pipeline
// run that succeeded, listed once, with one step job.
func TestScheduleFiresPipelines(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	name := "pipe"
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: %s, workspace: %s}
spec:
  cron: "@every 3s"
  catchupWindow: 1m
  overlapPolicy: allowAll
  action:
    pipelineTemplate:
      metadata: {labels: {purpose: schedule-test}}
      params: {threshold: "0.8"}
      spec:
        params: [{name: threshold}]
        steps:
          - name: eval
            job:
              framework: custom
              command: [sh, -c, 'echo "threshold $THRESHOLD"; echo "dlc:metric accuracy=0.9"']
              env: [{name: THRESHOLD, value: "${params.threshold}"}]
              roles: {worker: {replicas: 1}}
`, name, ws)
	if _, err := c.CreateSchedule(ctx, []byte(doc)); err != nil {
		t.Fatalf("create: %v", err)
	}
	waitSchedule(t, ctx, c, ws, name, "ran a pipeline", func(s *api.ScheduleView) bool { return itest.SucceededRuns(s.Status) >= 1 })
	if _, err := c.PauseSchedule(ctx, ws, name, "test over"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	final := waitSchedule(t, ctx, c, ws, name, "finished its runs", func(s *api.ScheduleView) bool { return len(s.Status.Running) == 0 })

	runs := itest.StartedRuns(final.Status)
	if len(runs) == 0 || int64(len(runs)) != final.Status.Counts.Started {
		t.Fatalf("started runs %v, counts %+v", runs, final.Status.Counts)
	}
	for run, r := range runs {
		if r.Kind != schemas.KindPipeline || r.Outcome != schemas.RunSucceeded || r.StartTime == nil ||
			run != workflows.ScheduledJobName(name, r.NominalTime) {
			t.Errorf("run %+v: want a Pipeline run named after its time, Succeeded", r)
		}
		p, err := c.GetPipeline(ctx, ws, run)
		if err != nil {
			t.Errorf("pipeline %s of the history: %v", run, err)
			continue
		}
		step := p.Status.Step("eval")
		if p.Status.Phase != schemas.PipelineSucceeded || step == nil || step.Phase != schemas.StepSucceeded ||
			step.Metrics["accuracy"] != 0.9 || p.Status.Params["threshold"] != "0.8" {
			t.Errorf("pipeline %s: %s, step %+v, params %v", run, p.Status.Phase, step, p.Status.Params)
		}
		if p.Spec.Metadata.Labels[schemas.LabelSchedule] != name || p.Spec.Metadata.Labels["purpose"] != "schedule-test" ||
			p.Spec.Metadata.Annotations[schemas.AnnotationNominalTime] != r.NominalTime.UTC().Format(time.RFC3339) {
			t.Errorf("pipeline %s: labels %v, annotations %v", run, p.Spec.Metadata.Labels, p.Spec.Metadata.Annotations)
		}
	}

	// Each run is one pipeline run and one step job, listed once under the schedule's
	// label (visibility lags a little).
	var pipelines, jobs map[string]int
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("%d pipeline runs and step jobs listed under the schedule's label", len(runs)), func() error {
		pipelines = scheduledPipelines(t, ctx, c, ws, name)
		jobs = itest.ListedJobs(t, ctx, c, ws, schemas.LabelSchedule+"="+name)
		if len(pipelines) < len(runs) || len(jobs) < len(runs) {
			return fmt.Errorf("pipelines %v, jobs %v", pipelines, jobs)
		}
		return nil
	}, 200*time.Millisecond)
	if len(pipelines) != len(runs) || len(jobs) != len(runs) {
		t.Errorf("%d pipeline runs and %d jobs listed under the label for %d runs: %v %v", len(pipelines), len(jobs), len(runs), pipelines, jobs)
	}
	for run := range runs {
		if pipelines[run] != 1 || jobs[schemas.StepJobName(run, "eval")] != 1 {
			t.Errorf("run %s: pipeline listed %d times, step job %d times; want once each", run, pipelines[run], jobs[schemas.StepJobName(run, "eval")])
		}
	}
	// Lineage from the schedule: every pipeline run it made and each run's step job, from
	// their run records.
	testutil.Eventually(t, itest.Left(ctx), "the schedule's lineage to hold every run and step", func() error {
		lin, err := c.Lineage(ctx, ws, dlc.LineageQuery{Schedule: name})
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, r := range lin.Records {
			got[string(r.Kind)+"/"+r.Name] = true
		}
		for run := range runs {
			for _, want := range []string{"Pipeline/" + run, "TrainingJob/" + schemas.StepJobName(run, "eval")} {
				if !got[want] {
					return fmt.Errorf("lineage %v lacks %s", got, want)
				}
			}
		}
		if len(got) != 2*len(runs) {
			return fmt.Errorf("lineage %v, want the %d runs and their steps only", got, len(runs))
		}
		return nil
	})
	recordHistory(t, ctx, workflows.ScheduleWorkflowID(ws, name), "schedule_pipeline_every_3s.json")
	if err := c.DeleteSchedule(ctx, ws, name); err != nil {
		t.Errorf("delete: %v", err)
	}
}

// scheduledPipelines lists the pipeline runs a schedule started, by its label, as run
// name → how many times listed.
func scheduledPipelines(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	opts := dlc.ListOptions{Labels: []string{schemas.LabelSchedule + "=" + name}}
	for {
		l, err := c.ListPipelines(ctx, ws, opts)
		if err != nil {
			t.Fatalf("list pipelines: %v", err)
		}
		for _, it := range l.Items {
			out[it.Name]++
		}
		if opts.PageToken = l.NextPageToken; opts.PageToken == "" {
			return out
		}
	}
}

// A schedule with an invalid cron expression or an unknown time zone is refused with
// field-path errors, and nothing is created.
func TestScheduleInvalidIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	_, err := c.CreateSchedule(ctx, scheduleDoc(ws, "bad", "61 * * * *", "  timeZone: Mars/Olympus"))
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 422 {
		t.Fatalf("create = %v, want 422", err)
	}
	var fields []string
	for _, d := range apiErr.API.Details {
		fields = append(fields, d.Field)
	}
	sort.Strings(fields)
	if strings.Join(fields, ",") != "spec.cron,spec.timeZone" {
		t.Errorf("fields = %v, want spec.cron and spec.timeZone", fields)
	}
	if _, err := c.GetSchedule(ctx, ws, "bad", 0); !dlc.IsNotFound(err) {
		t.Errorf("get = %v, want 404", err)
	}
}

// A worker killed across a fire time: the run of that time fires exactly once when a
// new worker comes back (its timer fired while no worker ran; the catch-up window
// covers the delay), and no time of the schedule is lost or doubled. Jobs are counted
// by the schedule's label through Temporal visibility. The schedule's run events hold
// one Started and one Finished event per run, numbered without gap or repeat.
func TestScheduleWorkerKilledAcrossAFireTimeFiresOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Its own stack, so that no other worker polls its task queue.
	e, stateDir, first := workerStack(t, ctx)
	c := itest.AdminClient(t, e)

	ws, name := "restart", "tock"
	if _, err := c.CreateSchedule(ctx, scheduleDoc(ws, name, "*/5 * * * * *", "  overlapPolicy: allowAll")); err != nil {
		t.Fatal(err)
	}
	st := waitSchedule(t, ctx, c, ws, name, "ran a job", func(s *api.ScheduleView) bool { return itest.SucceededRuns(s.Status) >= 1 })

	// The fire time the worker is down across: at least 2 s away.
	var across time.Time
	for _, n := range st.Status.Next {
		if time.Until(n.FireTime) > 2*time.Second {
			across = n.FireTime
			break
		}
	}
	if across.IsZero() {
		t.Fatalf("no usable next fire time in %+v", st.Status.Next)
	}
	time.Sleep(time.Until(across.Add(-time.Second)))
	first.kill()
	t.Logf("worker killed at %s, 1 s before %s", time.Now().Format(time.StampMilli), across.Format(time.StampMilli))
	time.Sleep(time.Until(across.Add(3 * time.Second)))
	startWorker(t, e, stateDir)
	t.Logf("worker restarted at %s", time.Now().Format(time.StampMilli))

	job := workflows.ScheduledJobName(name, across)
	st = waitSchedule(t, ctx, c, ws, name, "ran the job of "+across.String(), func(s *api.ScheduleView) bool {
		r, ok := itest.StartedRuns(s.Status)[job]
		return ok && r.Outcome == schemas.RunSucceeded
	})
	run := itest.StartedRuns(st.Status)[job]
	if run.StartTime == nil || run.StartTime.Sub(across) < 2*time.Second {
		t.Errorf("the run of %s started at %v: it should have waited for the new worker", across, run.StartTime)
	}

	if _, err := c.PauseSchedule(ctx, ws, name, "test over"); err != nil {
		t.Fatal(err)
	}
	final := waitSchedule(t, ctx, c, ws, name, "finished its runs", func(s *api.ScheduleView) bool { return len(s.Status.Running) == 0 })
	runs := itest.StartedRuns(final.Status)

	// Every nominal time from the first run to the last is there, 5 s apart, each once.
	var nominals []time.Time
	for _, r := range runs {
		nominals = append(nominals, r.NominalTime)
	}
	sort.Slice(nominals, func(i, j int) bool { return nominals[i].Before(nominals[j]) })
	for i := 1; i < len(nominals); i++ {
		if d := nominals[i].Sub(nominals[i-1]); d != 5*time.Second {
			t.Errorf("runs at %s and %s are %s apart: a time was lost or doubled", nominals[i-1], nominals[i], d)
		}
	}
	if final.Status.Counts.Missed != 0 || final.Status.Counts.Skipped != 0 {
		t.Errorf("counts = %+v, want nothing missed or skipped", final.Status.Counts)
	}
	var listed map[string]int
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("the %d runs listed under the schedule's label", len(runs)), func() error {
		if listed = itest.ListedJobs(t, ctx, c, ws, schemas.LabelSchedule+"="+name); len(listed) < len(runs) {
			return fmt.Errorf("listed %v", listed)
		}
		return nil
	}, 200*time.Millisecond)
	if len(listed) != len(runs) {
		t.Errorf("%d jobs listed under the label, %d runs started: %v", len(listed), len(runs), listed)
	}
	for j, n := range listed {
		if n != 1 {
			t.Errorf("job %s listed %d times", j, n)
		}
		if _, ok := runs[j]; !ok {
			t.Errorf("job %s listed but not a run of the schedule", j)
		}
	}
	if listed[job] != 1 {
		t.Errorf("the job of the time the worker was down across (%s) listed %d times, want 1", job, listed[job])
	}
	t.Logf("%d runs from %s to %s", len(nominals), nominals[0].Format(time.StampMilli), nominals[len(nominals)-1].Format(time.StampMilli))

	// The run events, through the kill: numbered 1, 2, ... with no gap or repeat, one
	// Started and one Finished event for each run started, the one across the kill
	// included.
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	testutil.Eventually(t, itest.Left(ctx), "one Started and one Finished run event per run", func() error {
		var errs []error
		actions := map[string][]string{}
		seq := 0
		err := js.ReadUntil(ctx, jetstream.EventsStream, events.ScheduleRunSubject(ws, name), nil, func(_ string, raw []byte) error {
			var ev events.Event
			var d events.ScheduleRunData
			if err := json.Unmarshal(raw, &ev); err != nil {
				return err
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return err
			}
			seq++
			if d.Seq != seq || ev.ID != fmt.Sprintf("%s:run:%d", d.UID, seq) {
				errs = append(errs, fmt.Errorf("event %d is %s (seq %d)", seq, ev.ID, d.Seq))
			}
			actions[d.Target] = append(actions[d.Target], d.Action)
			return nil
		})
		if err != nil {
			return err
		}
		for j := range runs {
			if got := strings.Join(actions[j], ","); got != "Started,Finished" {
				errs = append(errs, fmt.Errorf("run %s: events %s", j, got))
			}
		}
		if len(actions) != len(runs) {
			errs = append(errs, fmt.Errorf("events of %d runs, %d runs started", len(actions), len(runs)))
		}
		return errors.Join(errs...)
	}, 200*time.Millisecond)
}

// apiStatus is the HTTP status of an API error; 0 for other errors and nil.
func apiStatus(err error) int {
	if e, ok := errors.AsType[*dlc.Error](err); ok {
		return e.Status
	}
	return 0
}
