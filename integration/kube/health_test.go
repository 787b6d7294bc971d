package kube

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/backend"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas/schemastest"
	"github.com/opendlc/opendlc/workflows"
)

// healthBackend is a kubernetes backend with the worker's identity (the opendlc-worker
// service account and its role), whose check pods kwok completes after a second and
// whose quarantined nodes are due for a re-check at once.
func healthBackend(t *testing.T) *kubebackend.Backend {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubebackend.New(cs,
		kubebackend.WithHealthProbeAnnotations(map[string]string{kubestack.AnnotationCompleteAfter: "1s"}),
		kubebackend.WithQuarantineBackoff(0, 0),
		kubebackend.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// unquarantine removes a node's quarantine with the administrator's client, so a
// failing test leaves the shared cluster as it found it.
func unquarantine(t *testing.T, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := env.cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	var taints []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Key != kubebackend.TaintQuarantined {
			taints = append(taints, tn)
		}
	}
	ann := map[string]any{}
	for _, k := range []string{kubebackend.AnnotationQuarantineReason, kubebackend.AnnotationQuarantinedAt, kubebackend.AnnotationQuarantineCount,
		kubebackend.AnnotationQuarantineCheckedAt, kubebackend.AnnotationQuarantinedBy} {
		ann[k] = nil
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]any{kubebackend.LabelQuarantined: nil}, "annotations": ann},
		"spec":     map[string]any{"taints": taints},
	})
	if _, err := env.cluster.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// quarantineOf reads a node's quarantine marks.
func quarantineOf(t *testing.T, ctx context.Context, node string) (tainted, labelled bool, ann map[string]string) {
	t.Helper()
	n, err := env.cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tainted = slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == kubebackend.TaintQuarantined && tn.Value == "true" && tn.Effect == corev1.TaintEffectNoSchedule
	})
	ann = map[string]string{}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "opendlc.io/quarantine") {
			ann[k] = v
		}
	}
	return tainted, n.Labels[kubebackend.LabelQuarantined] == "true", ann
}

// A pre-flight check on the real control plane, as the worker's service account: the
// check pod on one node fails (kwok fails it, as a crashing nvidia-smi would), so that
// node is reported unhealthy and quarantined (tainted, labelled, annotated) while the
// others are healthy; once its backoff has passed, a re-check whose pod succeeds
// releases it.
func TestHealthCheckQuarantinesAndReleasesNode(t *testing.T) {
	ctx := testContext(t)
	b := healthBackend(t)
	const ws, jobName = "kube-health", "preflight"
	bad := env.cluster.Nodes[0]
	t.Cleanup(func() { unquarantine(t, bad) })

	// The fault: as soon as the bad node's check pod exists, make it fail.
	injected := make(chan error, 1)
	go func() {
		injected <- func() error {
			for {
				l, err := env.cluster.Client.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{
					LabelSelector: kubebackend.LabelHealthCheck + "=job," + kubebackend.LabelNode + "=" + bad,
				})
				if err == nil && len(l.Items) > 0 {
					return env.cluster.FailPod(ctx, ws, l.Items[0].Name, 3)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}()

	job := schemastest.Job(jobName).Workspace(ws).GPUs(1).Obj()
	start := time.Now()
	res, err := b.CheckNodes(ctx, backend.CheckNodesInput{
		Ref: backend.GangRef{Workspace: ws, Job: jobName, Attempt: 0}, Job: *job, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("CheckNodes: %v", err)
	}
	if err := <-injected; err != nil {
		t.Fatalf("fail the check pod: %v", err)
	}
	t.Logf("check of %d nodes took %s", len(res.Nodes), time.Since(start).Round(time.Millisecond))

	want := map[string]bool{}
	for _, n := range env.cluster.Nodes {
		want[n] = n != bad
	}
	got := map[string]bool{}
	for _, n := range res.Nodes {
		got[n.Node] = n.Healthy
		if n.Node == bad && (n.Reason != backend.ReasonProbeFailed || !n.Quarantined || !strings.Contains(n.Message, "exit code 3")) {
			t.Errorf("bad node's verdict: %+v", n)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("healthy by node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{bad}, res.Quarantined); diff != "" {
		t.Errorf("quarantined (-want +got):\n%s", diff)
	}
	tainted, labelled, ann := quarantineOf(t, ctx, bad)
	if !tainted || !labelled || ann[kubebackend.AnnotationQuarantineCount] != "1" || ann[kubebackend.AnnotationQuarantinedBy] != ws+"."+jobName+".a0" ||
		!strings.HasPrefix(ann[kubebackend.AnnotationQuarantineReason], "ProbeFailed: ") {
		t.Errorf("bad node: tainted %v labelled %v annotations %v", tainted, labelled, ann)
	}
	if _, err := time.Parse(time.RFC3339, ann[kubebackend.AnnotationQuarantinedAt]); err != nil {
		t.Errorf("quarantined-at: %v", err)
	}
	for _, n := range env.cluster.Nodes[1:] {
		if tainted, labelled, _ := quarantineOf(t, ctx, n); tainted || labelled {
			t.Errorf("healthy node %s quarantined", n)
		}
	}
	testutil.Eventually(t, itest.Left(ctx), "the check pods deleted", func() bool {
		l, err := env.cluster.Client.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{LabelSelector: kubebackend.LabelHealthCheck})
		return err == nil && len(l.Items) == 0
	}, itest.PollInterval)

	// Its backoff passed (zero here), the node is re-checked; its new check pod
	// succeeds, and it is released.
	rechecked, err := b.RecheckQuarantined(ctx, time.Minute)
	if err != nil {
		t.Fatalf("RecheckQuarantined: %v", err)
	}
	if len(rechecked) != 1 || rechecked[0].Node != bad || !rechecked[0].Healthy || rechecked[0].Quarantined {
		t.Fatalf("re-checked %+v, want %s released", rechecked, bad)
	}
	tainted, labelled, ann = quarantineOf(t, ctx, bad)
	if tainted || labelled || len(ann) != 0 {
		t.Errorf("released node: tainted %v labelled %v annotations %v", tainted, labelled, ann)
	}
	// Nothing quarantined is left to re-check.
	again, err := b.RecheckQuarantined(ctx, time.Minute)
	if err != nil || len(again) != 0 {
		t.Errorf("second re-check: %+v, %v", again, err)
	}
}

// A pod whose image cannot be pulled stays Pending, its container waiting with reason
// ErrImagePull and then ImagePullBackOff (stages/pod-image-pull-error.yaml), whether the
// image name says so or the pod's label does; other pods start as usual.
func TestImagePullErrorStage(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	const ns = "kube-imagepull"
	createNamespace(t, ctx, ns)
	pod := func(name, image string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: image}}},
		}
	}
	for _, p := range []*corev1.Pod{
		pod("by-image", "registry.local/"+kubestack.ImagePullErrorMarker+":1", nil),
		pod("by-label", "registry.local/train:1.4", map[string]string{kubestack.LabelImagePullError: "true"}),
		pod("fine", "registry.local/train:1.4", nil),
	} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitingReason := func(name string) (string, string, corev1.PodPhase) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				return c.State.Waiting.Reason, c.State.Waiting.Message, p.Status.Phase
			}
		}
		return "", "", p.Status.Phase
	}
	for _, name := range []string{"by-image", "by-label"} {
		seen := map[string]string{}
		testutil.Eventually(t, itest.Left(ctx), name+" in ImagePullBackOff", func() bool {
			reason, msg, phase := waitingReason(name)
			if phase != corev1.PodPending {
				t.Fatalf("pod %s is %s, want Pending", name, phase)
			}
			if reason == "ErrImagePull" || reason == "ImagePullBackOff" {
				seen[reason] = msg
			}
			return reason == "ImagePullBackOff"
		}, itest.PollInterval)
		if msg := seen["ImagePullBackOff"]; !strings.HasPrefix(msg, "Back-off pulling image \"registry.local/") {
			t.Errorf("pod %s: ImagePullBackOff message %q", name, msg)
		}
		if msg, ok := seen["ErrImagePull"]; ok && !strings.Contains(msg, "failed to pull and unpack image") {
			t.Errorf("pod %s: ErrImagePull message %q", name, msg)
		}
		t.Logf("pod %s: saw %v", name, seen)
	}
	testutil.Eventually(t, itest.Left(ctx), "the other pod running", func() bool {
		_, _, phase := waitingReason("fine")
		return phase == corev1.PodRunning
	}, itest.PollInterval)
	// Still pulling, well after a normal pod would have started.
	for _, name := range []string{"by-image", "by-label"} {
		if reason, _, phase := waitingReason(name); phase != corev1.PodPending || reason != "ImagePullBackOff" {
			t.Errorf("pod %s later: %s, %s", name, phase, reason)
		}
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("delete namespace: %v", err)
	}
}

// The worker, whose backend checks nodes, starts the one node self-healing workflow,
// which runs its first round at once; a restarted worker (TestWorkerKilledWhileCreatingPods)
// finds it running rather than starting another.
func TestHealthSelfHealingWorkflowRuns(t *testing.T) {
	ctx := testContext(t)
	tc, err := client.DialContext(ctx, client.Options{HostPort: env.stack.Stack.Temporal.Address, Namespace: env.stack.Stack.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var state workflows.NodeHealthState
	testutil.Eventually(t, itest.Left(ctx), "the node health workflow's first round", func() bool {
		d, err := tc.DescribeWorkflowExecution(ctx, workflows.NodeHealthWorkflowID, "")
		if err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return false
		}
		v, err := tc.QueryWorkflow(ctx, workflows.NodeHealthWorkflowID, "", workflows.QueryNodeHealth)
		return err == nil && v.Get(&state) == nil && state.Rounds >= 1
	}, itest.PollInterval)
	if state.LastError != "" {
		t.Errorf("the worker's re-check failed: %s", state.LastError)
	}
	// Starting it again, as every worker does at start, finds the running one.
	start := workflows.NodeHealthStart()
	run, err := tc.ExecuteWorkflow(ctx, start.ClientOptions(workflows.TaskQueue), start.WorkflowType, start.Input)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tc.DescribeWorkflowExecution(ctx, workflows.NodeHealthWorkflowID, "")
	if err != nil || run.GetRunID() != d.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Errorf("start again: run %s, running %v (%v)", run.GetRunID(), d.GetWorkflowExecutionInfo().GetExecution(), err)
	}
}
