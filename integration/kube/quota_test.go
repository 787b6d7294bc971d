package kube

import (
	"fmt"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// Two jobs whose sum exceeds the workspace quota run one after the other; a job of
// higher priority submitted later overtakes the waiting one; a job alone larger than
// the quota fails at once with the reason.
func TestWorkspaceQuotaQueuesJobsByPriority(t *testing.T) {
	ctx := testContext(t)
	const ws = "kube-quota"
	gpus := int64(4)
	if err := env.api.SetQuota(ctx, ws, api.Quota{GPU: &gpus, CPU: "64"}); err != nil {
		t.Fatal(err)
	}
	job := func(name string, priority, gpu int, completeAfter string) string {
		return kwokJob(name, ws, completeAfter, fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: quota, priority: %d}
  roles: {worker: {replicas: 2, resources: {gpu: %d, cpu: "4"}}}
`, priority, gpu))
	}
	// first runs until the test completes its pods, once second and urgent are queued
	// behind it (with a fixed run time, a slow test could see it end before that).
	submit(t, ctx, job("first", 0, 2, "1h"))
	waitJob(t, ctx, ws, "first", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, job("second", 0, 2, "3s"))
	queued := waitJob(t, ctx, ws, "second", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if queued.Status.Reason != "QuotaExceeded" {
		t.Errorf("second: reason %q (%s), want QuotaExceeded", queued.Status.Reason, queued.Status.Message)
	}
	submit(t, ctx, job("urgent", 10, 2, "3s"))
	waitJob(t, ctx, ws, "urgent", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if pods := jobPods(t, ctx, ws, "second"); len(pods) != 0 {
		t.Errorf("second has %d pods while queued, want none", len(pods))
	}
	st, err := env.api.GetQuota(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if st.Used.GPU != 4 || len(st.Queue) != 2 || st.Queue[0].Job != "urgent" || st.Queue[1].Job != "second" {
		t.Errorf("quota: used %d GPUs, queue %+v; want 4 used and urgent before second", st.Used.GPU, st.Queue)
	}

	// Too large for the quota on its own: fails fast, creates nothing.
	submit(t, ctx, job("huge", 0, 4, "3s"))
	huge := waitJob(t, ctx, ws, "huge", "terminal", terminal)
	if huge.Status.Phase != schemas.JobFailed || huge.Status.Reason != "QuotaExceeded" {
		t.Errorf("huge: %s %s (%s), want Failed QuotaExceeded", huge.Status.Phase, huge.Status.Reason, huge.Status.Message)
	}

	for _, p := range jobPods(t, ctx, ws, "first") {
		completePod(t, ctx, ws, p.Name)
	}

	ends := map[string]*api.Job{}
	for _, name := range []string{"first", "urgent", "second"} {
		j := waitJob(t, ctx, ws, name, "terminal", terminal)
		if j.Status.Phase != schemas.JobSucceeded {
			t.Fatalf("%s: %s (%s)", name, j.Status.Phase, j.Status.Message)
		}
		ends[name] = j
		for _, e := range j.Status.Timeline {
			t.Logf("%s: %s %s %s", name, e.Time.Format("15:04:05.000"), e.Phase, e.Reason)
		}
	}
	launched := func(j *api.Job) time.Time {
		for _, e := range j.Status.Timeline {
			if e.Phase == schemas.JobLaunching {
				return e.Time
			}
		}
		t.Fatalf("never launched: %v", timeline(j.Status))
		return time.Time{}
	}
	// One after the other: each starts only once the previous one has finished.
	if a, b := ends["first"].Status.FinishTime, launched(ends["urgent"]); b.Before(*a) {
		t.Errorf("urgent launched at %s, before first finished at %s", b, a)
	}
	if a, b := ends["urgent"].Status.FinishTime, launched(ends["second"]); b.Before(*a) {
		t.Errorf("second launched at %s, before urgent finished at %s", b, a)
	}
	testutil.Eventually(t, itest.Left(ctx), "the quota is free again", func() bool {
		st, err := env.api.GetQuota(ctx, ws)
		return err == nil && st.Used.GPU == 0 && len(st.Admitted) == 0
	}, itest.PollInterval)
}
