package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// makeSpotNodes turns nodes into the spot pool the way the worker expects it
// (--pool-selector spot=opendlc.io/spot=true, --pool-toleration spot=opendlc.io/spot:NoSchedule):
// labelled, and tainted so that only spot pods land there. The other nodes are the
// public pool. Cleanup puts the nodes back as they were.
func makeSpotNodes(t *testing.T, ctx context.Context, nodes ...string) {
	t.Helper()
	cs := env.cluster.Client.CoreV1().Nodes()
	for _, name := range nodes {
		n, err := cs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, hadLabel := n.Labels[spotLabel]
		n.Labels[spotLabel] = "true"
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: spotLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		if _, err := cs.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n, err := cs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			if !hadLabel {
				delete(n.Labels, spotLabel)
			}
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == spotLabel })
			if _, err := cs.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
}

// isSpotNode reports whether the node is labelled for the spot pool.
func isSpotNode(t *testing.T, ctx context.Context, name string) bool {
	t.Helper()
	n, err := env.cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[spotLabel] == "true"
}

// fillNode runs a pod that takes all 8 GPUs of a (spot) node, so no spot pod has room
// there; it goes when the test ends.
func fillNode(t *testing.T, ctx context.Context, ns, node string) {
	t.Helper()
	cs := env.cluster.Client
	gpu := corev1.ResourceList{"nvidia.com/gpu": resourceQuantity("8")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fill-" + node},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Key: spotLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.local/fill:1",
				Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	testutil.Eventually(t, itest.Left(ctx), "the filler running on "+node, func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}, itest.PollInterval)
}

// spotJob is a one-replica, 4-GPU spot job that kwok completes completeAfter after it
// starts, with extra resources fields (the spotFallback).
func spotJob(ws, name, completeAfter, resources string) string {
	return kwokJob(name, ws, completeAfter, fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: spot%s}
  roles: {worker: {replicas: 1, resources: {gpu: 4}}}
  logs: {forward: false}
`, resources))
}

// phaseEvent reports whether the job published a status event of phase with reason.
func phaseEvent(t *testing.T, ctx context.Context, ws, job string, phase schemas.JobPhase, reason string) bool {
	t.Helper()
	found := false
	err := env.api.Events(ctx, ws, dlc.EventOptions{Type: events.TypeJobPhase, Job: job}, func(ev events.Event) error {
		var d events.JobPhaseData
		if json.Unmarshal(ev.Data, &d) == nil && d.Phase == string(phase) && d.Reason == reason {
			found = true
		}
		return nil
	})
	return err == nil && found
}

// No spot node has room (two spot nodes, each filled): a spot job with
// spotFallback.afterWaiting and no placement timeout of its own waits that long, then
// is relaunched on the public node and succeeds, with the SpotFallback condition and a
// Queued/SpotFallback status event, and no restart counted. A spot job without
// spotFallback, submitted beside it, keeps waiting on spot.
func TestSpotFallbackAfterWaitingLandsOnPublic(t *testing.T) {
	ctx := testContext(t)
	const ws, fillNS = "kube-spot-wait", "kube-spot-fill"
	nodes := env.cluster.Nodes
	public, spots := nodes[0], nodes[1:]
	makeSpotNodes(t, ctx, spots...)
	createNamespace(t, ctx, fillNS)
	for _, n := range spots {
		fillNode(t, ctx, fillNS, n)
	}
	const wait = 5 * time.Second
	submitted := time.Now()
	submit(t, ctx, spotJob(ws, "fb", "3s", fmt.Sprintf(", spotFallback: {afterWaiting: %s}", wait)))
	submit(t, ctx, spotJob(ws, "stay", "3s", ""))

	// "stay" never leaves spot: checked on every poll while "fb" runs its course.
	checkStay := func() *api.Job {
		j, err := env.api.GetJob(ctx, ws, "stay")
		if err != nil {
			t.Fatal(err)
		}
		if p := j.Status.Phase; p != schemas.JobPending && p != schemas.JobLaunching && p != schemas.JobQueued {
			t.Fatalf("the job without spotFallback is %s: %s", p, j.Status.Message)
		}
		for _, p := range jobPods(t, ctx, ws, "stay") {
			if p.Spec.NodeName != "" {
				t.Fatalf("the job without spotFallback has pod %s on %s", p.Name, p.Spec.NodeName)
			}
			if p.Spec.NodeSelector[spotLabel] != "true" {
				t.Fatalf("the job without spotFallback has a pod %s outside spot (selector %v)", p.Name, p.Spec.NodeSelector)
			}
		}
		return j
	}
	var fb *api.Job
	testutil.Eventually(t, itest.Left(ctx), "the fallback job to end", func() bool {
		checkStay()
		j, err := env.api.GetJob(ctx, ws, "fb")
		if err != nil {
			t.Fatal(err)
		}
		fb = j
		if j.Status.Attempt == 1 && j.Status.Phase == schemas.JobRunning {
			for _, p := range attemptPods(t, ctx, ws, "fb", 1) {
				if p.Spec.NodeName != public {
					t.Errorf("public attempt's pod %s on %s, want the public node %s", p.Name, p.Spec.NodeName, public)
				}
			}
		}
		return terminal(j)
	}, itest.PollInterval)
	st := fb.Status
	if st.Phase != schemas.JobSucceeded || st.Restarts != 0 || st.Preemptions != 0 {
		t.Fatalf("fallback job %s, restarts %d, preemptions %d: %s", st.Phase, st.Restarts, st.Preemptions, st.Message)
	}
	if len(st.Attempts) != 2 || st.Attempts[0].Pool != schemas.PoolSpot || st.Attempts[1].Pool != schemas.PoolPublic {
		t.Fatalf("attempts %+v, want spot then public", st.Attempts)
	}
	c := conditionOf(st, schemas.ConditionSpotFallback)
	if c == nil || c.Status != schemas.ConditionTrue || c.Reason != "AfterWaiting" || !strings.Contains(c.Message, "0 of 1 replicas placed") {
		t.Errorf("SpotFallback condition %+v", c)
	}
	var fellBack time.Time
	for _, e := range st.Timeline {
		if e.Phase == schemas.JobQueued && e.Reason == "SpotFallback" {
			fellBack = e.Time
		}
	}
	waited := fellBack.Sub(st.Attempts[0].StartTime)
	if fellBack.IsZero() || waited < wait {
		t.Errorf("fell back %s after the spot attempt started (timeline %v), want after %s", waited, timeline(st), wait)
	}
	testutil.Eventually(t, itest.Left(ctx), "a Queued/SpotFallback status event", func() bool {
		return phaseEvent(t, ctx, ws, "fb", schemas.JobQueued, "SpotFallback")
	}, itest.PollInterval)
	t.Logf("spot attempt started %s, fell back %s later, public attempt running %s",
		st.Attempts[0].StartTime.Format("15:04:05.000"), waited.Round(time.Millisecond), st.Attempts[1].RunningTime.Format("15:04:05.000"))

	// The job without spotFallback: still waiting on spot three afterWaiting periods
	// after it was submitted (polled up to then, not slept).
	deadline := submitted.Add(3 * wait)
	testutil.Eventually(t, itest.Left(ctx), "three afterWaiting periods", func() bool {
		checkStay()
		return time.Now().After(deadline)
	}, itest.PollInterval)
	j := checkStay()
	if j.Status.Attempt != 0 || conditionOf(j.Status, schemas.ConditionSpotFallback) != nil {
		t.Errorf("the job without spotFallback: attempt %d, conditions %+v", j.Status.Attempt, j.Status.Conditions)
	}
	if _, err := env.api.StopJob(ctx, ws, "stay", "done"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, "stay", "terminal", terminal)
}

// Fallback after preemptions: two spot nodes and a public one. A spot termination
// handler drains the spot node under the job (the eviction API) twice; each eviction
// is seen as a preemption (checked), the second (afterPreemptions: 2) moves the job to
// the public node, where it succeeds, with the SpotFallback condition and event.
func TestSpotFallbackAfterPreemptions(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-spot-preempt", "reclaimed"
	nodes := env.cluster.Nodes
	public, spots := nodes[0], nodes[1:]
	makeSpotNodes(t, ctx, spots...)
	submit(t, ctx, spotJob(ws, name, "20s", ", spotFallback: {afterPreemptions: 2}"))

	for n := range 2 {
		j := restarted(t, ctx, ws, name, n)
		pods := attemptPods(t, ctx, ws, name, n)
		if len(pods) != 1 || !isSpotNode(t, ctx, pods[0].Spec.NodeName) {
			t.Fatalf("attempt %d pods %v, want one on a spot node", n, pods)
		}
		if j.Status.Preemptions != n {
			t.Fatalf("attempt %d running after %d preemptions", n, j.Status.Preemptions)
		}
		victim := pods[0]
		err := env.cluster.Client.PolicyV1().Evictions(ws).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: ws},
		})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, ctx, ws, name, fmt.Sprintf("preemption %d counted", n+1), func(j *api.Job) bool {
			return j.Status.Preemptions == n+1
		})
		t.Logf("evicted %s from spot node %s", victim.Name, victim.Spec.NodeName)
	}
	restarted(t, ctx, ws, name, 2)
	for _, p := range attemptPods(t, ctx, ws, name, 2) {
		if p.Spec.NodeName != public {
			t.Errorf("attempt 2 pod %s on %s, want the public node %s", p.Name, p.Spec.NodeName, public)
		}
	}
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	st := j.Status
	if st.Phase != schemas.JobSucceeded || st.Preemptions != 2 || st.Restarts != 0 {
		t.Fatalf("%s after %d preemptions, %d restarts: %s", st.Phase, st.Preemptions, st.Restarts, st.Message)
	}
	var pools []schemas.Pool
	for _, a := range st.Attempts {
		pools = append(pools, a.Pool)
		if a.Attempt < 2 && (a.Class != schemas.FailureEvicted || a.Action != "Preemption") {
			t.Errorf("attempt %d: class %s action %s, want Evicted, Preemption", a.Attempt, a.Class, a.Action)
		}
	}
	if !slices.Equal(pools, []schemas.Pool{schemas.PoolSpot, schemas.PoolSpot, schemas.PoolPublic}) {
		t.Errorf("pools of the attempts %v, want spot, spot, public", pools)
	}
	if c := conditionOf(st, schemas.ConditionSpotFallback); c == nil || c.Status != schemas.ConditionTrue || c.Reason != "AfterPreemptions" {
		t.Errorf("SpotFallback condition %+v", c)
	}
	testutil.Eventually(t, itest.Left(ctx), "a Restarting/SpotFallback status event", func() bool {
		return phaseEvent(t, ctx, ws, name, schemas.JobRestarting, "SpotFallback")
	}, itest.PollInterval)
}
