package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// publicPlacementTimeout is the placement timeout of the public pool's jobs in these
// tests: the worker runs with --pool-placement-timeout public=<it> (main_test.go).
const publicPlacementTimeout = "4s"

// A job whose pods are all scheduled at once but whose containers take longer than the
// pool's placement timeout to start (a slow image pull: kwok's pod-ready stage delayed
// by the pods' annotations, 10 to 11 s; kwok takes the jitter delay as the upper bound,
// so both are set) is placed, not timed out: it runs and succeeds in its first attempt.
func TestSlowImagePullIsNotAPlacementFailure(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-slow-pull", "slow"
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: %s
  workspace: %s
  annotations:
    kwok.opendlc.io/complete-after: 1s
    pod-ready.stage.kwok.x-k8s.io/delay: 10s
    pod-ready.stage.kwok.x-k8s.io/jitter-delay: 11s
spec:
  framework: pytorch
  image: registry.local/huge-image:1
  command: [torchrun, train.py]
  resources: {pool: public}
  roles: {worker: {replicas: 3, resources: {gpu: 8}}}
`, name, ws))

	// The fault: every pod is bound to a node while its container has not started.
	testutil.Eventually(t, itest.Left(ctx), "every pod scheduled, none running", func() bool {
		pods := jobPods(t, ctx, ws, name)
		for _, p := range pods {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending {
				return false
			}
		}
		return len(pods) == 3
	}, itest.PollInterval)
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Attempt != 0 {
		t.Fatalf("phase %s attempt %d: %s; timeline %v", j.Status.Phase, j.Status.Attempt, j.Status.Message, timeline(j.Status))
	}
	var launching, running *schemas.TimelineEntry
	for i, e := range j.Status.Timeline {
		if e.Reason == "PlacementTimeout" {
			t.Errorf("timeline has a placement timeout: %+v", e)
		}
		switch {
		case e.Phase == schemas.JobLaunching && launching == nil:
			launching = &j.Status.Timeline[i]
		case e.Phase == schemas.JobRunning && running == nil:
			running = &j.Status.Timeline[i]
		}
	}
	if launching == nil || running == nil {
		t.Fatalf("timeline %v lacks Launching or Running", timeline(j.Status))
	}
	// The containers really took longer to start than the placement timeout.
	timeout, err := time.ParseDuration(publicPlacementTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if waited := running.Time.Sub(launching.Time); waited <= timeout {
		t.Errorf("Launching → Running took %s, not longer than the placement timeout %s: the pull was not slow", waited, timeout)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, name), "training_job_placed_when_scheduled.json")
}

// A gang of which only part can be placed (blockers hold a third of the GPUs) and
// whose job sets no placement timeout hits its pool's (--pool-placement-timeout), is
// queued again with a message naming what was short, and holds no pod afterwards.
func TestPartlyPlacedGangHitsThePoolPlacementTimeout(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	const blockNS, ws, name = "kube-pool-timeout-block", "kube-pool-timeout", "partial"
	createNamespace(t, ctx, blockNS)
	for i := range 2 {
		gpu := corev1.ResourceList{"nvidia.com/gpu": resourceQuantity("4")}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "blocker-" + strconv.Itoa(i)},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "main", Image: "registry.local/blocker:1", Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu},
			}}},
		}
		if _, err := cs.CoreV1().Pods(blockNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), blockNS, metav1.DeleteOptions{})
	})
	testutil.Eventually(t, itest.Left(ctx), "the blockers scheduled", func() bool {
		l, err := cs.CoreV1().Pods(blockNS).List(ctx, metav1.ListOptions{})
		n := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return err == nil && n == 2
	}, itest.PollInterval)

	// 6 × 4 GPUs fit the 24 GPUs of the empty cluster, so the gang is launched, but
	// only 4 of its pods fit beside the blockers.
	submit(t, ctx, kwokJob(name, ws, "30s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: public}
  roles: {worker: {replicas: 6, resources: {gpu: 4}}}
`))
	testutil.Eventually(t, itest.Left(ctx), "4 of the 6 pods bound", func() bool {
		bound := 0
		for _, p := range jobPods(t, ctx, ws, name) {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 4
	}, itest.PollInterval)
	j := waitJob(t, ctx, ws, name, "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	want := "only 4 of 6 replicas were placed within " + publicPlacementTimeout
	if j.Status.Reason != "PlacementTimeout" || !strings.Contains(j.Status.Message, want) ||
		!strings.Contains(j.Status.Message, "Insufficient nvidia.com/gpu") {
		t.Errorf("queued: %s %q, want PlacementTimeout %q naming the short resource", j.Status.Reason, j.Status.Message, want)
	}
	if pods := jobPods(t, ctx, ws, name); len(pods) != 0 {
		var names []string
		for _, p := range pods {
			names = append(names, p.Name+"@"+p.Spec.NodeName)
		}
		t.Errorf("pods still there after the placement timeout: %v", names)
	}
	if _, err := env.api.StopJob(ctx, ws, name, "done"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, ws, name, "terminal", terminal)
}

// The scenario: examples/frameworks/pytorch.yaml (4 replicas × 8 GPUs) on the
// test cluster's 3 nodes × 8 GPUs. The job is told at once that it can never fit — it
// waits Queued with reason Unschedulable, the Schedulable condition False and a status
// event naming the GPUs short — and holds no pod.
func TestGangThatCanNeverFitIsToldSoAndHoldsNoPods(t *testing.T) {
	ctx := testContext(t)
	spec, err := os.ReadFile(filepath.Join(itest.Root(), "examples", "frameworks", "pytorch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const ws, name = "nlp", "llama-sft"
	submit(t, ctx, string(spec))
	j := waitJob(t, ctx, ws, name, "Queued as Unschedulable", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobQueued && j.Status.Reason == "Unschedulable"
	})
	short := "nvidia.com/gpu: 32 needed, 24 allocatable (8 on each node)"
	if !strings.Contains(j.Status.Message, short) || !strings.Contains(j.Status.Message, "4 replicas (master: 1, worker: 3)") {
		t.Errorf("message %q, want it to name the replicas and %q", j.Status.Message, short)
	}
	c := j.Status.Condition(schemas.ConditionSchedulable)
	if c == nil || c.Status != schemas.ConditionFalse || c.Reason != "Unschedulable" || c.Message != j.Status.Message {
		t.Errorf("Schedulable condition %+v", c)
	}
	for _, e := range j.Status.Timeline {
		if e.Phase == schemas.JobRunning {
			t.Errorf("timeline %v: the job ran", timeline(j.Status))
		}
	}
	if pods := jobPods(t, ctx, ws, name); len(pods) != 0 {
		t.Errorf("%d pods exist for a gang that cannot fit", len(pods))
	}
	if _, err := env.cluster.Client.CoreV1().Services(ws).Get(ctx, name+"-a0", metav1.GetOptions{}); err == nil {
		t.Error("the gang's Service was created")
	}

	// The status event says the same, for `dlc events` and notification rules.
	testutil.Eventually(t, itest.Left(ctx), "an Unschedulable status event", func() bool {
		found := false
		err := env.api.Events(ctx, ws, dlc.EventOptions{Type: events.TypeJobPhase, Job: name}, func(ev events.Event) error {
			var d events.JobPhaseData
			if json.Unmarshal(ev.Data, &d) == nil && d.Phase == string(schemas.JobQueued) && d.Reason == "Unschedulable" &&
				strings.Contains(d.Message, short) {
				found = true
			}
			return nil
		})
		return err == nil && found
	}, itest.PollInterval)

	if _, err := env.api.StopJob(ctx, ws, name, "done"); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, ctx, ws, name, "terminal", terminal); j.Status.Phase != schemas.JobStopped {
		t.Errorf("phase %s after stop: %s", j.Status.Phase, j.Status.Message)
	}
}
