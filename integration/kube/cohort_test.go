package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// quotaJob is a kwok job of the quota pool: replicas × gpu GPUs at priority, its pods
// completing after completeAfter; selector, when set, is a role nodeSelector line.
func quotaJob(name, ws string, priority, replicas, gpu int, completeAfter, selector string) string {
	sel := ""
	if selector != "" {
		sel = ", nodeSelector: {" + selector + "}"
	}
	return kwokJob(name, ws, completeAfter, fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: quota, priority: %d}
  roles: {worker: {replicas: %d, resources: {gpu: %d, cpu: "1"}%s}}
`, priority, replicas, gpu, sel))
}

func setQuota(t *testing.T, ctx context.Context, ws string, q api.Quota) {
	t.Helper()
	if err := env.api.SetQuota(ctx, ws, q); err != nil {
		t.Fatalf("set quota of %s: %v", ws, err)
	}
}

func quotaOf(t *testing.T, ctx context.Context, ws string) *api.QuotaStatus {
	t.Helper()
	st, err := env.api.GetQuota(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func jobNames(js []api.QuotaJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Job)
	}
	return out
}

func condition(j *api.Job, typ string) *schemas.Condition {
	for i, c := range j.Status.Conditions {
		if string(c.Type) == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// Two workspaces in a cohort on the kwok cluster: one borrows the other's idle GPUs
// up to what the other lends; when the lender needs its own quota back, the cohort
// reclaims it from the borrower's most recent job, which stops (its pods go), is
// requeued (not failed) and runs again once capacity is back.
func TestCohortBorrowLendAndReclaim(t *testing.T) {
	ctx := itest.Context(t, 4*time.Minute)
	const a, b, cohort = "kc-borrower", "kc-lender", "kc-team"
	setQuota(t, ctx, a, api.Quota{GPU: new(int64(2)), Cohort: cohort})
	setQuota(t, ctx, b, api.Quota{GPU: new(int64(2)), Cohort: cohort, LendingLimit: &api.QuotaLimit{GPU: new(int64(1))}})

	submit(t, ctx, quotaJob("a1", a, 0, 1, 2, "1h", ""))
	waitJob(t, ctx, a, "a1", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, quotaJob("a2", a, 0, 1, 1, "1h", ""))
	a2 := waitJob(t, ctx, a, "a2", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	if c := condition(a2, "Admitted"); c == nil || !strings.Contains(c.Message, "borrowing") {
		t.Errorf("a2's Admitted condition %+v: want it to say it borrows", c)
	}
	// The lender keeps 1 GPU of its 2 to itself (lendingLimit 1): a3 waits.
	submit(t, ctx, quotaJob("a3", a, 0, 1, 1, "1h", ""))
	a3 := waitJob(t, ctx, a, "a3", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if !strings.Contains(a3.Status.Message, "shared pool") {
		t.Errorf("a3 queued with %q, want the cohort's pool named", a3.Status.Message)
	}
	st := quotaOf(t, ctx, a)
	if st.Used.GPU != 3 || st.Borrowed.GPU != 1 || st.Cohort == nil || st.Cohort.Pool.GPU != 3 {
		t.Fatalf("borrower: used %d, borrowed %d, cohort %+v; want 3 used, 1 borrowed, pool 3", st.Used.GPU, st.Borrowed.GPU, st.Cohort)
	}
	if lender := quotaOf(t, ctx, b); lender.Lent.GPU != 1 || lender.Used.GPU != 0 {
		t.Errorf("lender: lent %d, used %d; want 1 lent, none used", lender.Lent.GPU, lender.Used.GPU)
	}
	a2Pods := jobPods(t, ctx, a, "a2")
	if len(a2Pods) != 1 {
		t.Fatalf("a2 has %d pods, want 1", len(a2Pods))
	}

	// The lender needs its 2 GPUs: a2 (the newest borrowing job) is reclaimed.
	submit(t, ctx, quotaJob("b1", b, 0, 1, 2, "1h", ""))
	pre := waitJob(t, ctx, a, "a2", "requeued", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobQueued && j.Status.Preemptions == 1
	})
	if !slices.ContainsFunc(pre.Status.Timeline, func(e schemas.TimelineEntry) bool { return e.Reason == workflows.ReasonQuotaPreempted }) {
		t.Errorf("a2's timeline has no %s step: %v", workflows.ReasonQuotaPreempted, timeline(pre.Status))
	}
	// The fault happened: a2's pod of attempt 0 was deleted.
	testutil.Eventually(t, itest.Left(ctx), "a2's pod deleted", func() bool {
		_, err := env.cluster.Client.CoreV1().Pods(a2Pods[0].Namespace).Get(ctx, a2Pods[0].Name, metav1.GetOptions{})
		return err != nil
	}, itest.PollInterval)
	if pre.Status.Preemptions != 1 || pre.Status.Restarts != 0 || len(pre.Status.Attempts) != 1 ||
		pre.Status.Attempts[0].Class != schemas.FailurePreempted {
		t.Errorf("a2 after the reclaim: preemptions %d, restarts %d, attempts %+v", pre.Status.Preemptions, pre.Status.Restarts, pre.Status.Attempts)
	}
	// The lender's workspace is named, not its job: that name is the other tenant's.
	if c := condition(pre, "Admitted"); c == nil || c.Status != schemas.ConditionFalse || c.Reason != "Reclaimed" ||
		strings.Contains(c.Message, "b1") || !strings.Contains(c.Message, b) {
		t.Errorf("a2's Admitted condition %+v: want False, Reclaimed, naming workspace %s and not its job", c, b)
	}
	b1 := waitJob(t, ctx, b, "b1", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	if c := condition(b1, "Admitted"); c == nil || !strings.Contains(c.Message, "preempting 1 job(s) of workspace "+a) || strings.Contains(c.Message, "a2") {
		t.Errorf("b1's Admitted condition %+v: want it to count what it preempted in %s, without the job's name", c, a)
	}
	if a1 := waitJob(t, ctx, a, "a1", "still running", func(*api.Job) bool { return true }); a1.Status.Phase != schemas.JobRunning || a1.Status.Preemptions != 0 {
		t.Errorf("a1 (within its own quota): %s, %d preemptions; want it untouched", a1.Status.Phase, a1.Status.Preemptions)
	}
	st = quotaOf(t, ctx, a)
	if st.Used.GPU != 2 || !slices.Equal(jobNames(st.Queue), []string{"a3", "a2"}) {
		t.Errorf("borrower after the reclaim: used %d, queue %v; want 2 and [a3 a2] (a2 asked again last)", st.Used.GPU, jobNames(st.Queue))
	}

	// Capacity back: b1 and a1 end; a3 and a2 run; a2's second attempt.
	for _, p := range jobPods(t, ctx, b, "b1") {
		completePod(t, ctx, p.Namespace, p.Name)
	}
	for _, p := range jobPods(t, ctx, a, "a1") {
		completePod(t, ctx, p.Namespace, p.Name)
	}
	again := waitJob(t, ctx, a, "a2", "running again", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobRunning && len(j.Status.Attempts) == 2
	})
	if again.Status.Attempts[1].Attempt != 1 {
		t.Errorf("a2's attempts %+v", again.Status.Attempts)
	}
	waitJob(t, ctx, a, "a3", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	for _, name := range []string{"a2", "a3"} {
		if _, err := env.api.StopJob(ctx, a, name, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// Within a workspace whose policy lets a higher priority preempt (withinWorkspace
// LowerPriority), an urgent job takes a running job's place; the preempted job waits
// behind, and raising its priority while it waits moves it ahead of another.
func TestPriorityPreemptionAndPriorityChange(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	const ws = "kc-priority"
	setQuota(t, ctx, ws, api.Quota{GPU: new(int64(2)), Preemption: &api.QuotaPreemption{WithinWorkspace: "LowerPriority"}})
	submit(t, ctx, quotaJob("low", ws, 0, 1, 2, "1h", ""))
	waitJob(t, ctx, ws, "low", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, quotaJob("urgent", ws, 10, 1, 2, "1h", ""))
	low := waitJob(t, ctx, ws, "low", "requeued", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobQueued && j.Status.Preemptions == 1
	})
	if c := condition(low, "Admitted"); c == nil || c.Reason != "PreemptedByPriority" || !strings.Contains(c.Message, "urgent") {
		t.Errorf("low's Admitted condition %+v: want PreemptedByPriority naming urgent", c)
	}
	waitJob(t, ctx, ws, "urgent", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, quotaJob("mid", ws, 5, 1, 2, "1h", ""))
	waitJob(t, ctx, ws, "mid", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if q := jobNames(quotaOf(t, ctx, ws).Queue); !slices.Equal(q, []string{"mid", "low"}) {
		t.Fatalf("queue %v, want [mid low]", q)
	}
	if _, err := env.api.SetJobPriority(ctx, ws, "low", 8); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "low ahead of mid after its priority is raised", func() bool {
		st, err := env.api.GetQuota(ctx, ws)
		return err == nil && slices.Equal(jobNames(st.Queue), []string{"low", "mid"})
	}, itest.PollInterval)
	// The job keeps the priority it was given: once admitted and preempted again, it
	// asks with 8, not its spec's 0, and goes back ahead of mid.
	if _, err := env.api.StopJob(ctx, ws, "urgent", ""); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, "low", "running again", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, quotaJob("top", ws, 9, 1, 2, "1h", ""))
	waitJob(t, ctx, ws, "low", "preempted a second time", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobQueued && j.Status.Preemptions == 2
	})
	testutil.Eventually(t, itest.Left(ctx), "low, asking again with priority 8, ahead of mid", func() bool {
		st, err := env.api.GetQuota(ctx, ws)
		return err == nil && slices.Equal(jobNames(st.Queue), []string{"low", "mid"}) && st.Queue[0].Priority == 8
	}, itest.PollInterval)
	// A job the quota does not hold cannot be given a priority there.
	if _, err := env.api.SetJobPriority(ctx, ws, "no-such-job", 1); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("priority of a job that does not exist: %v, want not found", err)
	}
	for _, name := range []string{"top", "low", "mid"} {
		if _, err := env.api.StopJob(ctx, ws, name, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// GPUs of a model (the node label nvidia.com/gpu.product a role selects) count against
// that model's quota: a second job of the model waits while the GPU total has room,
// and is placed on the node of that model once the first ends.
func TestGPUModelQuotaOnKwok(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	const ws, model = "kc-models", "Test-GPU-80GB"
	nodes, err := env.cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	node := nodes.Items[len(nodes.Items)-1].Name
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{workflows.GPUModelLabel: model}}})
	if _, err := env.cluster.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unpatch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{workflows.GPUModelLabel: nil}}})
		_, _ = env.cluster.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, unpatch, metav1.PatchOptions{})
	})
	setQuota(t, ctx, ws, api.Quota{GPU: new(int64(8)), GPUModels: map[string]int64{model: 2}})
	sel := workflows.GPUModelLabel + ": " + model
	submit(t, ctx, quotaJob("m1", ws, 0, 1, 2, "1h", sel))
	waitJob(t, ctx, ws, "m1", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	submit(t, ctx, quotaJob("m2", ws, 0, 1, 1, "1s", sel))
	m2 := waitJob(t, ctx, ws, "m2", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if want := "gpu/" + model + ": 1 requested, 2 of 2 in use"; !strings.Contains(m2.Status.Message, want) {
		t.Errorf("m2 queued with %q, want %q", m2.Status.Message, want)
	}
	st := quotaOf(t, ctx, ws)
	if st.Used.GPU != 2 || st.Used.GPUModels[model] != 2 || st.Limits.GPUModels[model] != 2 {
		t.Errorf("quota: used %+v, limits %+v", st.Used, st.Limits)
	}
	for _, p := range jobPods(t, ctx, ws, "m1") {
		if p.Spec.NodeName != node {
			t.Errorf("m1's pod %s on %s, want the %s node %s", p.Name, p.Spec.NodeName, model, node)
		}
		completePod(t, ctx, p.Namespace, p.Name)
	}
	if j := waitJob(t, ctx, ws, "m2", "terminal", terminal); j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("m2: %s (%s)", j.Status.Phase, j.Status.Message)
	}
}
