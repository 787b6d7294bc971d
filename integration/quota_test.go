package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
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
