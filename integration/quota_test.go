package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// On the embedded stack (local backend): two quota-pool jobs whose sum exceeds the
// workspace's CPU quota run one after the other, the second waiting in Queued.
func TestQuotaOnLocalBackend(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	if err := env.api.SetQuota(ctx, ws, api.Quota{CPU: "1"}); err != nil {
		t.Fatal(err)
	}
	job := func(name string) string {
		return itest.JobDoc(name, ws, `
  framework: custom
  command: [sh, -c, "sleep 2"]
  roles: {worker: {replicas: 1, resources: {cpu: "1"}}}
`)
	}
	submit(t, ctx, job("first"))
	waitFor(t, ctx, ws, "first", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, job("second"))
	q := waitFor(t, ctx, ws, "second", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if q.Status.Reason != "QuotaExceeded" {
		t.Errorf("second queued for %q (%s), want QuotaExceeded", q.Status.Reason, q.Status.Message)
	}
	first := waitTerminal(t, ctx, ws, "first")
	second := waitTerminal(t, ctx, ws, "second")
	if first.Status.Phase != schemas.JobSucceeded || second.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("first %s, second %s", first.Status.Phase, second.Status.Phase)
	}
	var launched *schemas.TimelineEntry
	for i, e := range second.Status.Timeline {
		if e.Phase == schemas.JobLaunching {
			launched = &second.Status.Timeline[i]
			break
		}
	}
	if launched == nil || launched.Time.Before(*first.Status.FinishTime) {
		t.Errorf("second launched at %v, first finished at %v: not one after the other", launched, first.Status.FinishTime)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "second"), "training_job_quota_queued.json")
}

// A job whose first attempt fails is restarted (maxRestarts) and its second attempt
// succeeds; DLC_ATTEMPT tells the replicas which attempt they are.
func TestRestartAfterFailureOnLocalBackend(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	j := runJob(t, ctx, ws, "flaky", `
  framework: custom
  command: [sh, -c, 'echo "attempt $DLC_ATTEMPT"; test "$DLC_ATTEMPT" != 0 || exit 3']
  roles: {worker: {replicas: 2}}
  faultTolerance: {maxRestarts: 1}
`)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 1 || len(j.Status.Attempts) != 2 {
		t.Fatalf("%s, restarts %d, attempts %d: %s", j.Status.Phase, j.Status.Restarts, len(j.Status.Attempts), j.Status.Message)
	}
	if a0 := j.Status.Attempts[0]; a0.Class != schemas.FailureError || a0.Action != "Retry" || a0.Outcome != schemas.JobRestarting {
		t.Errorf("attempt 0 %+v", a0)
	}
	phases := phaseList(j.Status)
	if !slices.Contains(phases, "Restarting") || phases[len(phases)-1] != "Succeeded" {
		t.Errorf("timeline %v: want a Restarting step, then Succeeded", phases)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "flaky"), "training_job_restarted.json")
}

// A failure rule on a log line, on the real log forwarder: the replica prints a CUDA
// error and exits 1; the rule says Fail, so the job ends at once with restarts left.
func TestLogPatternRuleFailsFast(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	j := runJob(t, ctx, ws, "cuda", `
  framework: custom
  command: [sh, -c, 'echo "RuntimeError: CUDA error: an illegal memory access was encountered"; exit 1']
  roles: {worker: {replicas: 1}}
  faultTolerance:
    maxRestarts: 3
    rules: [{logPattern: "CUDA error: an illegal memory access", action: Fail}]
`)
	if j.Status.Phase != schemas.JobFailed || j.Status.Restarts != 0 || len(j.Status.Attempts) != 1 {
		t.Fatalf("%s after %d restarts and %d attempts: %s", j.Status.Phase, j.Status.Restarts, len(j.Status.Attempts), j.Status.Message)
	}
	if a := j.Status.Attempts[0]; a.Action != "Fail" || !strings.Contains(j.Status.Message, "rule 0") {
		t.Errorf("attempt %+v, message %q", a, j.Status.Message)
	}
}

// A workspace changes cohort only while none of its jobs is admitted or queued: with a
// job running in the cohort, moving is refused naming the field and changes nothing;
// once the job has ended, the workspace leaves, and its next job is admitted by its own
// quota again.
func TestCohortChangeRefusedWhileJobsHeld(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	cohort := ws + "-c"
	if err := env.api.SetQuota(ctx, ws, api.Quota{CPU: "1", Cohort: cohort}); err != nil {
		t.Fatal(err)
	}
	job := func(name, secs string) string {
		return itest.JobDoc(name, ws, `
  framework: custom
  command: [sh, -c, "sleep `+secs+`"]
  roles: {worker: {replicas: 1, resources: {cpu: "1"}}}
`)
	}
	submit(t, ctx, job("held", "3"))
	waitFor(t, ctx, ws, "held", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	st, err := env.api.GetQuota(ctx, ws)
	if err != nil || st.Cohort == nil || st.Cohort.Name != cohort || len(st.Admitted) != 1 {
		t.Fatalf("quota in the cohort: %+v (%v), want held admitted by cohort %s", st, err, cohort)
	}
	err = env.api.SetQuota(ctx, ws, api.Quota{CPU: "1"})
	if err == nil || !strings.Contains(err.Error(), "cohort") {
		t.Fatalf("leaving the cohort with a job running: %v, want a refusal naming cohort", err)
	}
	if st, err := env.api.GetQuota(ctx, ws); err != nil || st.Limits.Cohort != cohort {
		t.Fatalf("after the refusal: %+v (%v), want still in %s", st, err, cohort)
	}
	if j := waitTerminal(t, ctx, ws, "held"); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("held: %s (%s)", j.Status.Phase, j.Status.Message)
	}
	// The release reaches the cohort's quota; then the move is allowed.
	testutil.Eventually(t, itest.Left(ctx), "the workspace leaving its cohort", func() bool {
		return env.api.SetQuota(ctx, ws, api.Quota{CPU: "1"}) == nil
	}, itest.PollInterval)
	submit(t, ctx, job("alone", "0"))
	j := waitTerminal(t, ctx, ws, "alone")
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("alone: %s (%s)", j.Status.Phase, j.Status.Message)
	}
	for _, c := range j.Status.Conditions {
		if c.Type == schemas.ConditionAdmitted && c.Message != "admitted by the workspace quota" {
			t.Errorf("alone admitted with %q, want by the workspace's own quota", c.Message)
		}
	}
}
