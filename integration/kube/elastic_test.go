package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// elasticJob is a PyTorch job of replicas workers, elastic between min and max, whose
// pods kwok runs until they are deleted.
func elasticJob(ws, name string, replicas, minR, maxR int, elastic bool) string {
	el := ""
	if elastic {
		el = fmt.Sprintf("\n  elastic: {minReplicas: %d, maxReplicas: %d}", minR, maxR)
	}
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: %s
  workspace: %s
spec:
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: %d}}%s
  faultTolerance: {maxRestarts: 2}
  logs: {forward: false}
`, name, ws, replicas, el)
}

// podUIDs maps the job's pods that are not being deleted to their UIDs.
func podUIDs(t *testing.T, ctx context.Context, ns, job string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, p := range jobPods(t, ctx, ns, job) {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}

func names(m map[string]types.UID) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// allRunning reports whether the job runs want replicas, every one Running.
func allRunning(want int) func(*api.Job) bool {
	return func(j *api.Job) bool {
		if j.Status.Phase != schemas.JobRunning || len(j.Status.Replicas) != want {
			return false
		}
		for _, r := range j.Status.Replicas {
			if r.Phase != schemas.ReplicaRunning {
				return false
			}
		}
		return true
	}
}

// scaleRefused asserts that a scale to n is refused with status and the field replicas.
func scaleRefused(t *testing.T, ctx context.Context, ws, name string, n int32, status int) {
	t.Helper()
	_, err := env.api.ScaleJob(ctx, ws, name, n)
	var e *dlc.Error
	if !errors.As(err, &e) {
		t.Fatalf("scale to %d: %v, want an API error", n, err)
	}
	if e.Status != status || len(e.API.Details) == 0 || e.API.Details[0].Field != "replicas" {
		t.Fatalf("scale to %d: %d %+v, want %d naming the field replicas", n, e.Status, e.API, status)
	}
	t.Logf("scale to %d refused: %d %s", n, e.Status, e.API.Message)
}

// checkKept asserts that every pod of before still exists with the same UID.
func checkKept(t *testing.T, before, now map[string]types.UID, what string) {
	t.Helper()
	for n, uid := range before {
		if now[n] != uid {
			t.Errorf("%s: pod %s has UID %q, want %q (it must keep running)", what, n, now[n], uid)
		}
	}
}

// An elastic job scales 2 → 4 → 3 while it runs: the pods added are new ranks of the
// worker role, the pod removed is the last one, and the others keep their UIDs; the
// job never leaves Running nor its attempt. Out-of-range and wrong-state scales are
// refused with 4xx naming replicas and change nothing.
func TestElasticScale(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-elastic-scale", "el"
	submit(t, ctx, elasticJob(ws, name, 2, 2, 4, true))
	waitJob(t, ctx, ws, name, "2 replicas running", allRunning(2))
	start := podUIDs(t, ctx, ws, name)
	if got, want := names(start), []string{"el-worker-0-a0", "el-worker-1-a0"}; !slices.Equal(got, want) {
		t.Fatalf("pods %v, want %v", got, want)
	}

	for _, n := range []int32{5, 1} {
		scaleRefused(t, ctx, ws, name, n, 400)
	}
	checkKept(t, start, podUIDs(t, ctx, ws, name), "after refused scales")
	if got := len(podUIDs(t, ctx, ws, name)); got != 2 {
		t.Fatalf("after refused scales: %d pods, want 2", got)
	}

	res, err := env.api.ScaleJob(ctx, ws, name, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.DesiredReplicas != 4 || res.CurrentReplicas != 4 {
		t.Fatalf("scale to 4: %+v", res)
	}
	j := waitJob(t, ctx, ws, name, "4 replicas running", allRunning(4))
	up := podUIDs(t, ctx, ws, name)
	if got, want := names(up), []string{"el-worker-0-a0", "el-worker-1-a0", "el-worker-2-a0", "el-worker-3-a0"}; !slices.Equal(got, want) {
		t.Fatalf("after scale to 4: pods %v, want %v", got, want)
	}
	checkKept(t, start, up, "after scale to 4")
	for _, p := range jobPods(t, ctx, ws, name) {
		e := envOf(p.Spec.Containers[0])
		if e["DLC_REPLICA"] != p.Labels["opendlc.io/replica-index"] || e["PET_NNODES"] != "2:4" || e["PET_RDZV_BACKEND"] != "c10d" {
			t.Errorf("%s: DLC_REPLICA %q (label %q), PET_NNODES %q, PET_RDZV_BACKEND %q", p.Name,
				e["DLC_REPLICA"], p.Labels["opendlc.io/replica-index"], e["PET_NNODES"], e["PET_RDZV_BACKEND"])
		}
	}
	t.Logf("after scale to 4: %v; status.elastic %+v", names(up), *j.Status.Elastic)

	if _, err := env.api.ScaleJob(ctx, ws, name, 3); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "3 pods left", func() bool { return len(podUIDs(t, ctx, ws, name)) == 3 }, itest.PollInterval)
	j = waitJob(t, ctx, ws, name, "3 replicas running", allRunning(3))
	down := podUIDs(t, ctx, ws, name)
	if got, want := names(down), []string{"el-worker-0-a0", "el-worker-1-a0", "el-worker-2-a0"}; !slices.Equal(got, want) {
		t.Fatalf("after scale to 3: pods %v, want %v", got, want)
	}
	kept := maps.Clone(up)
	delete(kept, "el-worker-3-a0") // the replica the scale removed
	checkKept(t, kept, down, "after scale to 3")
	if e := j.Status.Elastic; e == nil || e.DesiredReplicas != 3 || e.CurrentReplicas != 3 {
		t.Fatalf("status.elastic %+v, want desired 3 current 3", e)
	}
	if c := conditionOf(j.Status, schemas.ConditionScaled); c == nil || c.Status != schemas.ConditionTrue || c.Reason != "Scaled" {
		t.Errorf("condition Scaled: %+v", c)
	}
	if j.Status.Attempt != 0 || len(j.Status.Attempts) != 1 {
		t.Errorf("attempt %d, %d attempts: a scale must not restart the gang", j.Status.Attempt, len(j.Status.Attempts))
	}
	checkOnlyRunningAfterStart(t, j.Status, 2)
	t.Logf("timeline: %v", timeline(j.Status))

	if _, err := env.api.StopJob(ctx, ws, name, "done"); err != nil {
		t.Fatal(err)
	}
	scaleRefused(t, ctx, ws, name, 3, 409)
}

// checkOnlyRunningAfterStart asserts that once Running, the job's timeline holds
// Running entries only (scales, replacements), wantScaled of them after the first.
func checkOnlyRunningAfterStart(t *testing.T, st schemas.JobStatus, wantMore int) {
	t.Helper()
	first := slices.IndexFunc(st.Timeline, func(e schemas.TimelineEntry) bool { return e.Phase == schemas.JobRunning })
	if first < 0 {
		t.Fatalf("never Running: %v", timeline(st))
	}
	more := 0
	for _, e := range st.Timeline[first+1:] {
		if e.Phase.Terminal() {
			break
		}
		if e.Phase != schemas.JobRunning {
			t.Errorf("the job left Running: %v", timeline(st))
			return
		}
		more++
	}
	if more != wantMore {
		t.Errorf("%d Running entries after the first, want %d: %v", more, wantMore, timeline(st))
	}
}

// A pod of an elastic job is deleted: only it is recreated (same name, new UID), the
// other keeps its UID, the job never leaves Running and stays on attempt 0; the
// replacement uses one restart.
func TestElasticReplaceOnePod(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-elastic-replace", "er"
	submit(t, ctx, elasticJob(ws, name, 2, 2, 3, true))
	waitJob(t, ctx, ws, name, "2 replicas running", allRunning(2))
	before := podUIDs(t, ctx, ws, name)
	victim := "er-worker-1-a0"
	zero := int64(0)
	if err := env.cluster.Client.CoreV1().Pods(ws).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// The fault happened: the victim's pod is gone or replaced.
	testutil.Eventually(t, itest.Left(ctx), "the deleted pod is replaced", func() bool {
		now := podUIDs(t, ctx, ws, name)
		return now[victim] != "" && now[victim] != before[victim]
	}, itest.PollInterval)
	j := waitJob(t, ctx, ws, name, "replaced and running", func(j *api.Job) bool {
		return allRunning(2)(j) && j.Status.Elastic != nil && j.Status.Elastic.Replacements == 1
	})
	after := podUIDs(t, ctx, ws, name)
	if after["er-worker-0-a0"] != before["er-worker-0-a0"] {
		t.Errorf("er-worker-0-a0: UID %q, want %q (it must keep running)", after["er-worker-0-a0"], before["er-worker-0-a0"])
	}
	if got := names(after); !slices.Equal(got, []string{"er-worker-0-a0", victim}) {
		t.Errorf("pods %v", got)
	}
	if j.Status.Attempt != 0 || len(j.Status.Attempts) != 1 || j.Status.Restarts != 1 {
		t.Errorf("attempt %d, %d attempts, %d restarts: want attempt 0, 1 attempt, 1 restart", j.Status.Attempt, len(j.Status.Attempts), j.Status.Restarts)
	}
	checkOnlyRunningAfterStart(t, j.Status, 1)
	if c := conditionOf(j.Status, schemas.ConditionScaled); c == nil || c.Reason != "ReplicaReplaced" {
		t.Errorf("condition Scaled: %+v", c)
	}
	t.Logf("before %v, after %v; timeline %v", before, after, timeline(j.Status))
	if _, err := env.api.StopJob(ctx, ws, name, "done"); err != nil {
		t.Fatal(err)
	}
}

// The same deletion in a job without spec.elastic restarts the whole gang: attempt 1,
// every pod new. Scaling it is refused (400, replicas).
func TestElasticNonElasticRestartsGang(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-elastic-static", "st"
	submit(t, ctx, elasticJob(ws, name, 2, 0, 0, false))
	waitJob(t, ctx, ws, name, "2 replicas running", allRunning(2))
	scaleRefused(t, ctx, ws, name, 3, 400)
	zero := int64(0)
	if err := env.cluster.Client.CoreV1().Pods(ws).Delete(ctx, "st-worker-1-a0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	j := restarted(t, ctx, ws, name, 1)
	pods := attemptPods(t, ctx, ws, name, 1)
	if len(pods) != 2 || j.Status.Restarts != 1 {
		t.Fatalf("attempt 1: %d pods, %d restarts; want 2 new pods, 1 restart", len(pods), j.Status.Restarts)
	}
	testutil.Eventually(t, itest.Left(ctx), "attempt 0's pods gone", func() bool { return len(attemptPods(t, ctx, ws, name, 0)) == 0 }, itest.PollInterval)
	if j.Status.Elastic != nil {
		t.Errorf("status.elastic %+v on a job without spec.elastic", j.Status.Elastic)
	}
	if _, err := env.api.StopJob(ctx, ws, name, "done"); err != nil {
		t.Fatal(err)
	}
}
