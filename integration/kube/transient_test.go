package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// The grace periods the tests' worker runs with (startWorker): short, so the tests
// wait them out in seconds, yet long enough for a blip to pass within them.
const (
	testImagePullGrace = 15 * time.Second
	testNodeLostGrace  = 5 * time.Second
)

// A node whose kubelet stops heartbeating, for real: kwok stops renewing its Lease, and
// the kube-controller-manager's node lifecycle controller marks it Unknown once its
// node monitor grace period passes. The replicas on it are failed as NodeLost only
// after the worker's node-lost grace, and the job is restarted on the other nodes and
// runs again.
func TestTransientNodeLeaseExpires(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	const ws, name = "kube-transient-node", "lease"
	submit(t, ctx, recoveryJob(ws, name, "", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	bad := attemptPods(t, ctx, ws, name, 0)[0].Spec.NodeName

	if err := env.cluster.StopNodeHeartbeat(ctx, bad); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.cluster.ResumeNodeHeartbeat(ctx, bad); err != nil {
			t.Errorf("node %s never came back: %v", bad, err)
		}
	})

	// The fault happened as a lost kubelet's does: the controller, not a stage, marked
	// the node Unknown, and kwok did not take its lease back.
	var cond corev1.NodeCondition
	testutil.Eventually(t, itest.Left(ctx), "node "+bad+" Unknown", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				cond = c
			}
		}
		return cond.Status == corev1.ConditionUnknown
	}, itest.PollInterval)
	unknown := time.Now()
	if cond.Reason != "NodeStatusUnknown" {
		t.Errorf("node %s Ready condition: %s %q, want reason NodeStatusUnknown from the node lifecycle controller", bad, cond.Reason, cond.Message)
	}
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != kubestack.HeartbeatStoppedHolder {
		t.Errorf("lease of %s held by %v: kwok took it back", bad, h)
	}

	j := restarted(t, ctx, ws, name, 1)
	a0 := j.Status.Attempts[0]
	if a0.Class != schemas.FailureNodeLost || a0.Node != bad || a0.Action != "Retry" {
		t.Errorf("attempt 0: class %s node %s action %s (%s), want NodeLost on %s, Retry", a0.Class, a0.Node, a0.Action, a0.Message, bad)
	}
	// The replicas were failed no sooner than the grace after the node went Unknown
	// (the transition time has whole seconds, so it is never later than the truth).
	if a0.FaultTime == nil || a0.FaultTime.Sub(cond.LastTransitionTime.Time) < testNodeLostGrace {
		t.Errorf("attempt 0 failed at %v, node Unknown since %v: sooner than the %s grace", a0.FaultTime, cond.LastTransitionTime, testNodeLostGrace)
	}
	for _, p := range attemptPods(t, ctx, ws, name, 1) {
		if p.Spec.NodeName == bad {
			t.Errorf("%s runs on the lost node %s", p.Name, bad)
		}
	}
	if !slices.Contains(j.Status.ExcludedNodes, bad) {
		t.Errorf("excluded nodes %v, want %s", j.Status.ExcludedNodes, bad)
	}
	running := j.Status.Attempts[1].RunningTime
	t.Logf("lease stopped %s → node Unknown %s (seen %s) → replicas failed %s → released %s → attempt 1 Running %s",
		stopped.Format("15:04:05.000"), cond.LastTransitionTime.Format("15:04:05"), unknown.Format("15:04:05.000"),
		a0.FaultTime.Format("15:04:05.000"), a0.ReleasedTime.Format("15:04:05.000"), running.Format("15:04:05.000"))
	if _, err := env.api.StopJob(ctx, ws, name, "test done"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, name, "terminal", terminal)
}

// A node that goes NotReady and comes back within the node-lost grace fails nothing.
func TestTransientNodeBlipFailsNothing(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	const ws, name = "kube-transient-blip", "blip"
	submit(t, ctx, recoveryJob(ws, name, "", ""))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	node := attemptPods(t, ctx, ws, name, 0)[0].Spec.NodeName
	if err := env.cluster.SetNodeNotReady(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.cluster.SetNodeReady(context.Background(), node) })
	readyIs := func(s corev1.ConditionStatus) func() bool {
		return func() bool {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == s
				}
			}
			return false
		}
	}
	testutil.Eventually(t, itest.Left(ctx), "node "+node+" NotReady", readyIs(corev1.ConditionFalse), itest.PollInterval)
	notReady := time.Now()
	// NotReady for half the grace: the worker, which observes every second, sees it
	// (without a grace the job would fail now), and the job keeps running.
	testutil.Consistently(t, testNodeLostGrace/2-time.Since(notReady), "the job runs on through the NotReady", func() error {
		j, err := env.api.GetJob(ctx, ws, name)
		if err != nil {
			return err
		}
		if j.Status.Attempt != 0 || j.Status.Phase != schemas.JobRunning {
			return fmt.Errorf("%s into the NotReady: %+v", time.Since(notReady), j.Status)
		}
		if !readyIs(corev1.ConditionFalse)() {
			return fmt.Errorf("node %s Ready again on its own", node)
		}
		return ctx.Err()
	}, 100*time.Millisecond)
	if err := env.cluster.SetNodeReady(ctx, node); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "node "+node+" Ready again", readyIs(corev1.ConditionTrue), itest.PollInterval)
	back := time.Now()
	if back.Sub(notReady) >= testNodeLostGrace {
		t.Fatalf("the blip lasted %s, not within the %s grace", back.Sub(notReady), testNodeLostGrace)
	}
	// Nothing fails until well past the grace.
	testutil.Consistently(t, time.Until(notReady.Add(2*testNodeLostGrace)), "the job runs on after the blip", func() error {
		j, err := env.api.GetJob(ctx, ws, name)
		if err != nil {
			return err
		}
		if j.Status.Attempt != 0 || j.Status.Phase != schemas.JobRunning {
			return fmt.Errorf("after a %s blip of %s: %s, attempt %d: %s", back.Sub(notReady).Round(time.Millisecond), node,
				j.Status.Phase, j.Status.Attempt, j.Status.Message)
		}
		return ctx.Err()
	}, 200*time.Millisecond)
	t.Logf("node %s NotReady for %s: job still Running attempt 0 %s after", node, back.Sub(notReady).Round(time.Millisecond), time.Since(notReady).Round(time.Millisecond))
	if _, err := env.api.StopJob(ctx, ws, name, "test done"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, name, "terminal", terminal)
}

// pullJob is a 2-replica job whose image pull fails (kubestack's pull-error stages):
// with message as the pull error when set (a registry timing out), else with
// containerd's "not found".
func pullJob(ws, name, message string) string {
	ann := ""
	if message != "" {
		ann = fmt.Sprintf("%s: %q", kubestack.AnnotationImagePullMessage, message)
	}
	return kubeJob(name, ws, ann, fmt.Sprintf(`
  framework: pytorch
  image: registry.local/%s:1
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 1}}}
  faultTolerance: {maxRestarts: 2}
  logs: {forward: false}
`, kubestack.ImagePullErrorMarker))
}

// registryTimeout is a pull error that may go away: containerd's message for a
// registry that does not answer.
const registryTimeout = `rpc error: code = Unknown desc = failed to pull and unpack image "registry.local/pull-error:1": ` +
	`failed to resolve reference "registry.local/pull-error:1": failed to do request: Head "https://registry.local/v2/pull-error/manifests/1": dial tcp 10.96.7.7:443: i/o timeout`

// pullFailing waits until every pod of the job's attempt 0 waits in ImagePullBackOff
// whose message contains want, and returns the earliest time a pod's pull failed (the
// stage's transition time, in whole seconds).
func pullFailing(t *testing.T, ctx context.Context, ws, name, want string) time.Time {
	t.Helper()
	var first time.Time
	testutil.Eventually(t, itest.Left(ctx), name+"'s pods in ImagePullBackOff", func() bool {
		pods := attemptPods(t, ctx, ws, name, 0)
		if len(pods) != 2 {
			return false
		}
		for _, p := range pods {
			cs := p.Status.ContainerStatuses
			if len(cs) == 0 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ImagePullBackOff" ||
				!strings.Contains(cs[0].State.Waiting.Message, want) {
				return false
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodInitialized && (first.IsZero() || c.LastTransitionTime.Before(&metav1.Time{Time: first})) {
					first = c.LastTransitionTime.Time
				}
			}
		}
		return true
	}, itest.PollInterval)
	return first
}

// An image pull that fails for a reason that may go away does not fail the job while
// it lasts less than the image pull grace: once the registry answers, the pods run and
// the job is Running in its first attempt.
func TestTransientImagePullRecovers(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-transient-pull", "recovers"
	submit(t, ctx, pullJob(ws, name, registryTimeout))
	first := pullFailing(t, ctx, ws, name, "i/o timeout")
	// The pulls keep failing for a third of the window; the job waits.
	testutil.Consistently(t, testImagePullGrace/3-time.Since(first), "the job waits through the pull errors", func() error {
		j, err := env.api.GetJob(ctx, ws, name)
		if err != nil {
			return err
		}
		if j.Status.Phase.Terminal() || j.Status.Attempt != 0 {
			return fmt.Errorf("%s into the pull errors: %s, attempt %d: %s", time.Since(first).Round(time.Millisecond), j.Status.Phase, j.Status.Attempt, j.Status.Message)
		}
		return ctx.Err()
	}, 200*time.Millisecond)
	// The registry is back: the next pull succeeds.
	for _, p := range attemptPods(t, ctx, ws, name, 0) {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"false"}}}`, kubestack.LabelImagePullError)
		if _, err := env.cluster.Client.CoreV1().Pods(ws).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	j := waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning || j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobRunning || j.Status.Attempt != 0 || j.Status.Restarts != 0 {
		t.Fatalf("after the pull recovered: %s, attempt %d, %d restarts: %s", j.Status.Phase, j.Status.Attempt, j.Status.Restarts, j.Status.Message)
	}
	t.Logf("pulls failed from %s for %s; job Running in attempt 0", first.Format("15:04:05"), time.Since(first).Round(time.Millisecond))
	if _, err := env.api.StopJob(ctx, ws, name, "test done"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, name, "terminal", terminal)
}

// An image pull that keeps failing fails the job as ImagePull once the image pull
// grace has passed, not before; an image the registry says does not exist fails it at
// once.
func TestTransientImagePullWindow(t *testing.T) {
	ctx := testContext(t)
	const ws = "kube-transient-window"
	submitted := time.Now()
	submit(t, ctx, pullJob(ws, "missing", ""))
	submit(t, ctx, pullJob(ws, "outage", registryTimeout))
	first := pullFailing(t, ctx, ws, "outage", "i/o timeout")

	failed := func(name string) api.Job {
		j := waitJob(t, ctx, ws, name, "terminal", terminal)
		if j.Status.Phase != schemas.JobFailed || len(j.Status.Attempts) != 1 {
			t.Fatalf("%s: %s after %d attempts, want Failed in its first", name, j.Status.Phase, len(j.Status.Attempts))
		}
		if a0 := j.Status.Attempts[0]; a0.Class != schemas.FailureImagePull || a0.Action != "Fail" || a0.FaultTime == nil {
			t.Fatalf("%s: attempt 0 class %s action %s, want ImagePull, Fail", name, a0.Class, a0.Action)
		}
		return *j
	}
	missing := failed("missing")
	if m := missing.Status.Attempts[0]; m.FaultTime.Sub(submitted) >= testImagePullGrace || !strings.Contains(m.Message, "does not exist") {
		t.Errorf("missing image failed %s after submission (%q): want at once, not after the %s window",
			m.FaultTime.Sub(submitted).Round(time.Millisecond), m.Message, testImagePullGrace)
	}
	outage := failed("outage")
	o := outage.Status.Attempts[0]
	if o.FaultTime.Sub(first) < testImagePullGrace || !strings.Contains(o.Message, "image pull failing for") {
		t.Errorf("outage failed %s after its first pull error (%q): want after the %s window",
			o.FaultTime.Sub(first).Round(time.Millisecond), o.Message, testImagePullGrace)
	}
	t.Logf("missing image: failed %s after submission; outage: failed %s after its first pull error",
		missing.Status.Attempts[0].FaultTime.Sub(submitted).Round(time.Millisecond), o.FaultTime.Sub(first).Round(time.Millisecond))
}
