package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// On the embedded stack, with a workspace quota that one job fills: a job with a
// queueTimeout that is held in Queued by the quota fails with reason QueueTimeout (its
// event and the Launched condition say so), and a job with a timeout that waited in
// Queued longer than that timeout still launches once admitted and runs until its
// timeout, counted from its launch, kills it.
func TestQueueTimeoutAndTimeoutFromLaunch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	if err := env.api.SetQuota(ctx, ws, api.Quota{CPU: "1"}); err != nil {
		t.Fatal(err)
	}
	job := func(name, extra string) string {
		return itest.JobDoc(name, ws, `
  framework: custom
  command: [sh, -c, "sleep 120"]
  roles: {worker: {replicas: 1, resources: {cpu: "1"}}}
`+extra)
	}
	submit(t, ctx, job("holder", ""))
	waitFor(t, ctx, ws, "holder", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	const timeout = 3 * time.Second
	submit(t, ctx, job("impatient", "  queueTimeout: 2s\n"))
	submit(t, ctx, job("late", fmt.Sprintf("  timeout: %s\n", timeout)))

	// The impatient job waits in Queued (the quota is full), then fails on its own.
	imp := waitTerminal(t, ctx, ws, "impatient")
	if imp.Status.Phase != schemas.JobFailed || imp.Status.Reason != "QueueTimeout" {
		t.Fatalf("impatient ended %s (%s: %s), want Failed QueueTimeout", imp.Status.Phase, imp.Status.Reason, imp.Status.Message)
	}
	if got := phaseList(imp.Status); len(got) < 2 || got[len(got)-2] != "Queued" {
		t.Errorf("impatient timeline %v: want Queued just before Failed", got)
	}
	if c := imp.Status.Condition(schemas.ConditionLaunched); c == nil || c.Status != schemas.ConditionFalse || c.Reason != "QueueTimeout" {
		t.Errorf("impatient Launched condition %+v, want False QueueTimeout", c)
	}
	evs := statusEvents(t, ctx, ws, "impatient")
	if last := evs[len(evs)-1]; last.Phase != "Failed" || last.Reason != "QueueTimeout" || last.Previous != "Queued" {
		t.Errorf("impatient's last status event %+v, want Failed QueueTimeout after Queued", last)
	}
	if len(imp.Status.Attempts) != 0 {
		t.Errorf("impatient ran %d attempts, want none", len(imp.Status.Attempts))
	}

	// The late job has waited in Queued longer than its timeout...
	late := waitFor(t, ctx, ws, "late", "Queued for longer than its timeout", func(j *api.Job) bool {
		q := firstEntry(j.Status, schemas.JobQueued)
		return j.Status.Phase == schemas.JobQueued && q != nil && time.Since(q.Time) > timeout+time.Second
	})
	if late.Status.Reason != "QuotaExceeded" {
		t.Errorf("late queued for %s, want QuotaExceeded", late.Status.Reason)
	}
	// ...and still runs once the holder leaves.
	if _, err := env.api.StopJob(ctx, ws, "holder", "make room"); err != nil {
		t.Fatal(err)
	}
	late = waitTerminal(t, ctx, ws, "late")
	if late.Status.Phase != schemas.JobFailed || late.Status.Reason != "Timeout" {
		t.Fatalf("late ended %s (%s: %s), want Failed Timeout", late.Status.Phase, late.Status.Reason, late.Status.Message)
	}
	queued, launched, running := firstEntry(late.Status, schemas.JobQueued), firstEntry(late.Status, schemas.JobLaunching),
		firstEntry(late.Status, schemas.JobRunning)
	if queued == nil || launched == nil || running == nil {
		t.Fatalf("late timeline %v: want Queued, Launching and Running", phaseList(late.Status))
	}
	if waited := launched.Time.Sub(queued.Time); waited <= timeout {
		t.Errorf("late waited %s in Queued, want more than its timeout %s", waited, timeout)
	}
	if ran := late.Status.FinishTime.Sub(launched.Time); ran < timeout {
		t.Errorf("late was killed %s after its launch, want at least its timeout %s", ran, timeout)
	}
	if len(late.Status.Attempts) != 1 {
		t.Errorf("late ran %d attempts, want 1", len(late.Status.Attempts))
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "impatient"), "training_job_queue_timeout.json")
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "late"), "training_job_timeout_from_launch.json")
}

// firstEntry returns the first timeline entry of phase, or nil.
func firstEntry(st schemas.JobStatus, phase schemas.JobPhase) *schemas.TimelineEntry {
	for i, e := range st.Timeline {
		if e.Phase == phase {
			return &st.Timeline[i]
		}
	}
	return nil
}
