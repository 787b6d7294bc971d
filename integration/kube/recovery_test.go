package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// recoveryJob is a 2-replica PyTorch job that restarts on failure and checkpoints to
// S3; kwok completes its pods after completeAfter (never when empty).
func recoveryJob(ws, name, completeAfter, extra string) string {
	ann := ""
	if completeAfter != "" {
		ann = "kwok.opendlc.io/complete-after: " + completeAfter
	}
	return kubeJob(name, ws, ann, fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 4}}}
  checkpoint: {uri: "s3://dlc/kube-recovery/%s"}
  faultTolerance: {maxRestarts: 2}
  logs: {forward: false}
%s`, name, extra))
}

// attemptPods are the job's pods of one attempt.
func attemptPods(t *testing.T, ctx context.Context, ns, job string, attempt int) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range jobPods(t, ctx, ns, job) {
		if strings.HasSuffix(p.Name, fmt.Sprintf("-a%d", attempt)) {
			out = append(out, p)
		}
	}
	return out
}

// checkpoints writes a complete checkpoint at step 100 and a partial one (files, no
// manifest: the trainer died while saving) at step 200, and returns the complete one's
// reference.
func checkpoints(t *testing.T, ctx context.Context, uri string) string {
	t.Helper()
	store, err := checkpoint.NewStore(env.stack.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Save(ctx, uri, 100, map[string][]byte{"model.bin": []byte("weights at 100")}, map[string]float64{"loss": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	client, bucket, prefix := itest.RawS3(t, env.stack, uri)
	key := fmt.Sprintf("%s/%0*d/model.bin", strings.TrimSuffix(prefix, "/"), checkpoint.StepDigits, 200)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("half of step 200")}); err != nil {
		t.Fatal(err)
	}
	return m.Ref
}

// restarted waits until the job runs its attempt n (n restarts or preemptions).
func restarted(t *testing.T, ctx context.Context, ws, name string, n int) *api.Job {
	t.Helper()
	return waitJob(t, ctx, ws, name, fmt.Sprintf("Running attempt %d", n), func(j *api.Job) bool {
		return j.Status.Attempt == n && j.Status.Phase == schemas.JobRunning
	})
}

// checkResumed asserts that every pod of the attempt resumes from ref.
func checkResumed(t *testing.T, ctx context.Context, ns, job string, attempt int, ref string) {
	t.Helper()
	pods := attemptPods(t, ctx, ns, job, attempt)
	if len(pods) != 2 {
		t.Fatalf("attempt %d has %d pods, want 2", attempt, len(pods))
	}
	for _, p := range pods {
		if got := envOf(p.Spec.Containers[0])["DLC_RESUME_FROM"]; got != ref {
			t.Errorf("%s: DLC_RESUME_FROM %q, want the newest complete checkpoint %q", p.Name, got, ref)
		}
	}
}

// A node goes NotReady mid-job: its replica is seen lost after the worker's node-lost
// grace (testNodeLostGrace; not after Kubernetes' eviction timeout), the job restarts
// off that node from the newest complete checkpoint (the partial one is ignored) and
// finishes. TestTransientNodeLeaseExpires stops the node's heartbeat for real.
func TestRecoveryNodeStopsHeartbeating(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-node", "hb"
	submit(t, ctx, recoveryJob(ws, name, "15s", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	ref := checkpoints(t, ctx, "s3://dlc/kube-recovery/"+name)
	bad := attemptPods(t, ctx, ws, name, 0)[0].Spec.NodeName
	if err := env.cluster.SetNodeNotReady(ctx, bad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.cluster.SetNodeReady(context.Background(), bad) })

	j := restarted(t, ctx, ws, name, 1)
	a0 := j.Status.Attempts[0]
	if a0.Class != schemas.FailureNodeLost || a0.Node != bad || a0.Action != "Retry" {
		t.Errorf("attempt 0: class %s node %s action %s, want NodeLost on %s, Retry", a0.Class, a0.Node, a0.Action, bad)
	}
	if !slices.Contains(j.Status.ExcludedNodes, bad) {
		t.Errorf("excluded nodes %v, want %s", j.Status.ExcludedNodes, bad)
	}
	for _, p := range attemptPods(t, ctx, ws, name, 1) {
		if p.Spec.NodeName == bad {
			t.Errorf("%s runs on the lost node %s", p.Name, bad)
		}
	}
	checkResumed(t, ctx, ws, name, 1, ref)
	j = waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 1 {
		t.Errorf("%s after %d restarts: %s", j.Status.Phase, j.Status.Restarts, j.Status.Message)
	}
	if n := len(attemptPods(t, ctx, ws, name, 0)); n != 0 {
		t.Errorf("%d pods of the failed attempt remain", n)
	}
	t.Logf("fault %s → released %s → attempt 1 running %s",
		a0.FaultTime.Format("15:04:05.000"), a0.ReleasedTime.Format("15:04:05.000"), j.Status.Attempts[1].RunningTime.Format("15:04:05.000"))
}

// A replica exits 137 (killed): classified Signal, its node excluded, restarted from
// the newest complete checkpoint, finished.
func TestRecoveryPodExits137(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-137", "killed"
	submit(t, ctx, recoveryJob(ws, name, "15s", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	ref := checkpoints(t, ctx, "s3://dlc/kube-recovery/"+name)
	victim := attemptPods(t, ctx, ws, name, 0)[0]
	if err := env.cluster.FailPod(ctx, ws, victim.Name, 137); err != nil {
		t.Fatal(err)
	}
	j := restarted(t, ctx, ws, name, 1)
	a0 := j.Status.Attempts[0]
	if a0.Class != schemas.FailureSignal || a0.Replica != victim.Name {
		t.Errorf("attempt 0: class %s replica %s, want Signal on %s", a0.Class, a0.Replica, victim.Name)
	}
	if !slices.Contains(j.Status.ExcludedNodes, victim.Spec.NodeName) {
		t.Errorf("excluded %v, want %s", j.Status.ExcludedNodes, victim.Spec.NodeName)
	}
	checkResumed(t, ctx, ws, name, 1, ref)
	j = waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 1 {
		t.Errorf("%s after %d restarts: %s", j.Status.Phase, j.Status.Restarts, j.Status.Message)
	}
}

// A pod is evicted (the eviction API, as a drain does): a preemption, recovered
// without using up maxRestarts.
func TestRecoveryEvictedPod(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-evict", "evicted"
	submit(t, ctx, recoveryJob(ws, name, "15s", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	victim := attemptPods(t, ctx, ws, name, 0)[1]
	err := env.cluster.Client.PolicyV1().Evictions(ws).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: ws},
	})
	if err != nil {
		t.Fatal(err)
	}
	j := restarted(t, ctx, ws, name, 1)
	if a0 := j.Status.Attempts[0]; a0.Class != schemas.FailureEvicted || a0.Action != "Preemption" {
		t.Errorf("attempt 0: class %s action %s, want Evicted, Preemption", a0.Class, a0.Action)
	}
	j = waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Preemptions != 1 || j.Status.Restarts != 0 {
		t.Errorf("%s: preemptions %d restarts %d: %s", j.Status.Phase, j.Status.Preemptions, j.Status.Restarts, j.Status.Message)
	}
}

// A replica hangs: nothing comes out of any replica for hangTimeout. The attempt is
// restarted; the new one completes.
func TestRecoveryHangingReplica(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-hang", "hang"
	// kwok pods write nothing: every attempt is silent until the test completes it.
	spec := strings.Replace(recoveryJob(ws, name, "", ""), "faultTolerance: {maxRestarts: 2}", "faultTolerance: {maxRestarts: 2, hangTimeout: 6s}", 1)
	spec = strings.Replace(spec, "logs: {forward: false}", "logs: {forward: true}", 1)
	submit(t, ctx, spec)
	restarted(t, ctx, ws, name, 1)
	for _, p := range attemptPods(t, ctx, ws, name, 1) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"0s"}}}`, kubestack.AnnotationCompleteAfter)
		if _, err := env.cluster.Client.CoreV1().Pods(ws).Patch(ctx, p.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 1 || j.Status.Attempts[0].Class != schemas.FailureHang {
		t.Errorf("%s restarts %d attempts %+v: %s", j.Status.Phase, j.Status.Restarts, j.Status.Attempts, j.Status.Message)
	}
}

// An image that cannot be pulled fails the job at once, whatever maxRestarts says.
func TestRecoveryImagePullFailsFast(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-pull", "nopull"
	spec := strings.Replace(recoveryJob(ws, name, "15s", ""), "registry.local/train:1.4", "registry.local/"+kubestack.ImagePullErrorMarker+":1", 1)
	submit(t, ctx, spec)
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobFailed || j.Status.Restarts != 0 || len(j.Status.Attempts) != 1 {
		t.Fatalf("%s after %d restarts, %d attempts: %s", j.Status.Phase, j.Status.Restarts, len(j.Status.Attempts), j.Status.Message)
	}
	if a0 := j.Status.Attempts[0]; a0.Class != schemas.FailureImagePull || a0.Action != "Fail" || !strings.Contains(j.Status.Message, "ImagePull") {
		t.Errorf("attempt %+v, message %q", a0, j.Status.Message)
	}
}

// The worker is SIGKILLed in the middle of a recovery: after its restart there is
// exactly one set of pods and the restart count is unchanged.
func TestRecoveryWorkerKilledMidRecovery(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-kill", "midway"
	submit(t, ctx, recoveryJob(ws, name, "15s", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	if err := env.cluster.FailPod(ctx, ws, attemptPods(t, ctx, ws, name, 0)[0].Name, 1); err != nil {
		t.Fatal(err)
	}
	r := waitJob(t, ctx, ws, name, "Restarting", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRestarting })
	stopWorker()
	// Keep the worker down until the restart's backoff (1 s for the first restart) has
	// passed since the job entered Restarting, so the relaunch is the new worker's.
	restarting := r.Status.Timeline[len(r.Status.Timeline)-1].Time
	testutil.Eventually(t, itest.Left(ctx), "the restart backoff to pass with no worker", func() bool {
		return time.Since(restarting) > 1500*time.Millisecond
	}, itest.PollInterval)
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	j := restarted(t, ctx, ws, name, 1)
	if j.Status.Restarts != 1 {
		t.Errorf("restarts %d after the worker restart, want 1", j.Status.Restarts)
	}
	if a1, a2 := attemptPods(t, ctx, ws, name, 1), attemptPods(t, ctx, ws, name, 2); len(a1) != 2 || len(a2) != 0 {
		t.Errorf("%d pods of attempt 1 and %d of attempt 2, want exactly one set of 2", len(a1), len(a2))
	}
	j = waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 1 || j.Status.Attempt != 1 {
		t.Errorf("%s, attempt %d, restarts %d: %s", j.Status.Phase, j.Status.Attempt, j.Status.Restarts, j.Status.Message)
	}
}

// The pre-flight health check of a job finds one node's check pod failing: that node is
// quarantined and excluded, the job runs on the healthy nodes, and its status holds
// the check's verdict.
func TestRecoveryHealthCheckExcludesBadNode(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-rec-health", "checked"
	bad := env.cluster.Nodes[0]
	submitFailingCheck(t, ctx, ws, name, bad)
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("%s: %s", j.Status.Phase, j.Status.Message)
	}
	if !slices.Contains(j.Status.ExcludedNodes, bad) {
		t.Errorf("excluded %v, want %s", j.Status.ExcludedNodes, bad)
	}
	healthy := 0
	for _, h := range j.Status.Health {
		switch {
		case h.Node == bad && (h.Healthy || h.Reason != backend.ReasonProbeFailed):
			t.Errorf("bad node's verdict %+v", h)
		case h.Node != bad && h.Healthy:
			healthy++
		}
	}
	if healthy != len(env.cluster.Nodes)-1 {
		t.Errorf("health %+v: want %d healthy nodes", j.Status.Health, len(env.cluster.Nodes)-1)
	}
	if tainted, labelled, _ := quarantineOf(t, ctx, bad); !tainted || !labelled {
		t.Errorf("node %s: tainted %v labelled %v, want quarantined", bad, tainted, labelled)
	}
	if c := conditionOf(j.Status, schemas.ConditionHealthChecked); c == nil || !strings.Contains(c.Message, "quarantined "+bad) {
		t.Errorf("HealthChecked condition %+v", c)
	}
}

func conditionOf(st schemas.JobStatus, t schemas.ConditionType) *schemas.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
