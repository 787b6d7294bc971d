package realnode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

var (
	noticeLine     = regexp.MustCompile(`^dlc:notice signal=SIGTERM step=(\d+)$`)
	checkpointLine = regexp.MustCompile(`^dlc:checkpoint step=(\d+) uri=(\S+)$`)
)

// A job borrowing a cohort's idle CPU on the real nodes is preempted when the lender
// needs its quota back: the trainer in its container gets SIGTERM, writes a final
// checkpoint at the step it had reached (it writes no periodic checkpoint before the
// last epoch), and exits; the job is requeued, not failed, and once the lender's job
// has ended it resumes from that very checkpoint and finishes every epoch exactly once.
func TestPreemptedJobResumesFromItsNoticeCheckpoint(t *testing.T) {
	t.Parallel()
	// The borrower's pod may still be ending when the lender's starts.
	reserve(t, "500m", "500m")
	ctx := itest.Context(t, 8*time.Minute)
	const borrower, lender, cohort, name = "rn-borrower", "rn-lender", "rn-fair", "long-train"
	if err := env.api.SetQuota(ctx, borrower, api.Quota{CPU: "0", Cohort: cohort}); err != nil {
		t.Fatal(err)
	}
	if err := env.api.SetQuota(ctx, lender, api.Quota{CPU: "500m", Cohort: cohort}); err != nil {
		t.Fatal(err)
	}
	// 60 epochs of at least 300 ms: the reclaim must land while attempt 0 still
	// trains, however loaded the machine (16 epochs finished first once in CI).
	const epochs = 60
	uri := "s3://dlc/workspaces/" + borrower + "/checkpoints/" + name
	submit(t, ctx, job(name, borrower, fmt.Sprintf(`
  framework: custom
  command: [%s]
  args: [--epochs, "%d", --lr, "0.2", --epoch-sleep, 300ms, --checkpoint-every, "1000"]
  resources: {pool: quota}
  roles: {worker: {replicas: 1, resources: {cpu: 500m, memory: 256Mi}}}
  checkpoint: {uri: %s}
`, images.TrainerBinary, epochs, uri)))
	running := itest.WaitJob(t, ctx, env.api, borrower, name, "training", func(j *api.Job) bool {
		if j.Status.Phase != schemas.JobRunning {
			return false
		}
		for _, r := range itest.JobLogs(t, ctx, env.api, borrower, name) {
			if v, ok := events.ParseMetricLine(r.Line); ok && v["epoch"] >= 2 {
				return true
			}
		}
		return false
	})
	if st, err := env.api.GetQuota(ctx, borrower); err != nil || st.Borrowed.CPU != "500m" {
		t.Fatalf("borrower's quota %+v (%v): want 500m borrowed", st, err)
	}

	// The lender needs its half core: the borrowing job is reclaimed.
	submit(t, ctx, job("lender-job", lender, `
  framework: custom
  command: [sh, -c, "sleep 1"]
  resources: {pool: quota}
  roles: {worker: {replicas: 1, resources: {cpu: 500m}}}
`))
	mustSucceed(t, ctx, lender, "lender-job")
	final := mustSucceed(t, ctx, borrower, name)

	// The fault happened: attempt 0 was preempted, and its trainer got SIGTERM.
	if final.Status.Preemptions != 1 || final.Status.Restarts != 0 || len(final.Status.Attempts) != 2 {
		t.Fatalf("preemptions %d, restarts %d, attempts %+v; want one preemption and a second attempt",
			final.Status.Preemptions, final.Status.Restarts, final.Status.Attempts)
	}
	a0, a1 := final.Status.Attempts[0], final.Status.Attempts[1]
	if a0.Class != schemas.FailurePreempted || !strings.Contains(a0.Message, lender) || strings.Contains(a0.Message, "lender-job") {
		t.Errorf("attempt 0: class %s, message %q; want Preempted naming the lender's workspace (not its job)", a0.Class, a0.Message)
	}
	queuedAgain := false
	for _, e := range final.Status.Timeline {
		queuedAgain = queuedAgain || (e.Phase == schemas.JobQueued && e.Reason == workflows.ReasonQuotaPreempted)
	}
	if !queuedAgain {
		t.Errorf("timeline %v: no Queued step for the preemption", final.Status.Timeline)
	}
	noticeStep, noticeRef := -1, ""
	epochsSeen := map[int]int{}
	firstOfAttempt1 := 0
	for _, r := range jobLogs(t, ctx, borrower, name) {
		if m := noticeLine.FindStringSubmatch(r.Line); m != nil && r.Attempt == 0 {
			noticeStep, _ = strconv.Atoi(m[1])
		}
		if m := checkpointLine.FindStringSubmatch(r.Line); m != nil && r.Attempt == 0 {
			if step, _ := strconv.Atoi(m[1]); noticeStep < 0 || step != noticeStep {
				t.Errorf("attempt 0 checkpoint line %q: want one only after the notice, at its step %d", r.Line, noticeStep)
			}
			noticeRef = m[2]
		}
		if v, ok := events.ParseMetricLine(r.Line); ok {
			e := int(v["epoch"])
			epochsSeen[e]++
			if r.Attempt == 1 && firstOfAttempt1 == 0 {
				firstOfAttempt1 = e
			}
		}
	}
	if noticeStep <= 0 || noticeRef == "" {
		t.Fatalf("attempt 0 printed no notice and checkpoint (notice step %d, ref %q): the trainer got no SIGTERM or saved nothing", noticeStep, noticeRef)
	}
	// The recovery: attempt 1 resumed from the checkpoint taken at the notice, which
	// is complete in S3, and carried on after it.
	if a1.ResumedFrom != noticeRef {
		t.Errorf("attempt 1 resumed from %q, want the notice checkpoint %q", a1.ResumedFrom, noticeRef)
	}
	store, err := checkpoint.NewStore(env.stack.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := store.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range manifests {
		found = found || m.Step == int64(noticeStep)
	}
	if !found {
		t.Errorf("no complete checkpoint at step %d under %s (%d manifests)", noticeStep, uri, len(manifests))
	}
	if firstOfAttempt1 <= 1 {
		t.Errorf("attempt 1 began at epoch %d: it did not resume", firstOfAttempt1)
	}
	for e := 1; e <= epochs; e++ {
		if epochsSeen[e] != 1 {
			t.Errorf("epoch %d reported %d times over both attempts, want once", e, epochsSeen[e])
		}
	}
	t.Logf("preempted after epoch %d at step %d (%s); attempt 1 began at epoch %d; the job had been running since %s",
		firstOfAttempt1-1, noticeStep, noticeRef, firstOfAttempt1, running.Status.StartTime)
}
