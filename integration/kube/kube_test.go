package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// A 4-replica job gets exactly 4 pods with the rendezvous env and GPU limits, and a
// headless Service; kwok runs them then completes them; the job succeeds and every
// object is cleaned up.
func TestFourReplicaJobRunsAndIsCleanedUp(t *testing.T) {
	ctx := testContext(t)
	submit(t, ctx, kwokJob("ddp", "kube-ddp", "4s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles:
    worker: {replicas: 4, resources: {cpu: "4", memory: 16Gi, gpu: 4}}
`))
	j := waitJob(t, ctx, "kube-ddp", "ddp", "Running", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobRunning || j.Status.Phase.Terminal()
	})
	if j.Status.Phase != schemas.JobRunning {
		t.Fatalf("phase %s (%s), want Running", j.Status.Phase, j.Status.Message)
	}
	pods := jobPods(t, ctx, "kube-ddp", "ddp")
	if len(pods) != 4 {
		t.Fatalf("%d pods, want 4", len(pods))
	}
	svc, err := env.cluster.Client.CoreV1().Services("kube-ddp").Get(ctx, "ddp-a0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("headless service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service clusterIP %q, want None", svc.Spec.ClusterIP)
	}
	var names, ranks []string
	for _, p := range pods {
		names = append(names, p.Name)
		c := p.Spec.Containers[0]
		e := envOf(c)
		ranks = append(ranks, e["RANK"])
		if e["WORLD_SIZE"] != "4" || e["MASTER_ADDR"] != "worker-0.ddp-a0.kube-ddp.svc" || e["MASTER_PORT"] == "" {
			t.Errorf("pod %s env: WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s", p.Name, e["WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"])
		}
		if e["DLC_JOB"] != "ddp" || e["DLC_WORKSPACE"] != "kube-ddp" || e["DLC_S3_ENDPOINT"] == "" {
			t.Errorf("pod %s DLC env: %v", p.Name, e)
		}
		if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 4 {
			t.Errorf("pod %s gpu limit %v, want 4", p.Name, q.String())
		}
		if p.Spec.NodeName == "" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != svc.UID {
			t.Errorf("pod %s: node %q owners %+v", p.Name, p.Spec.NodeName, p.OwnerReferences)
		}
		if p.Spec.Hostname != p.Labels["opendlc.io/role"]+"-"+p.Labels["opendlc.io/replica-index"] || p.Spec.Subdomain != "ddp-a0" {
			t.Errorf("pod %s hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
	}
	sort.Strings(names)
	sort.Strings(ranks)
	if diff := cmp.Diff([]string{"ddp-worker-0-a0", "ddp-worker-1-a0", "ddp-worker-2-a0", "ddp-worker-3-a0"}, names); diff != "" {
		t.Errorf("pod names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3"}, ranks); diff != "" {
		t.Errorf("ranks (-want +got):\n%s", diff)
	}

	j = waitJob(t, ctx, "kube-ddp", "ddp", "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, timeline(j.Status)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	for _, r := range j.Status.Replicas {
		if r.Node == "" || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("replica %s: node %q exit %v", r.Name, r.Node, r.ExitCode)
		}
	}
	testutil.Eventually(t, itest.Left(ctx), "pods and service deleted", func() bool {
		_, err := env.cluster.Client.CoreV1().Services("kube-ddp").Get(ctx, "ddp-a0", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(jobPods(t, ctx, "kube-ddp", "ddp")) == 0
	}, itest.PollInterval)
}

// A pod failed by the kwok chaos stage fails the job with the container's exit code.
func TestChaosFailedPodFailsJobWithExitCode(t *testing.T) {
	ctx := testContext(t)
	submit(t, ctx, itest.JobDoc("chaos", "kube-chaos", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles:
    master: {replicas: 1}
    worker: {replicas: 2, resources: {gpu: 8}}
`))
	waitJob(t, ctx, "kube-chaos", "chaos", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	if err := env.cluster.FailPod(ctx, "kube-chaos", "chaos-worker-1-a0", 42); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, ctx, "kube-chaos", "chaos", "terminal", terminal)
	if j.Status.Phase != schemas.JobFailed || j.Status.ExitCode == nil || *j.Status.ExitCode != 42 {
		t.Fatalf("status %s exit %v (%s), want Failed with exit code 42", j.Status.Phase, j.Status.ExitCode, j.Status.Message)
	}
	testutil.Eventually(t, itest.Left(ctx), "every pod deleted", func() bool { return len(jobPods(t, ctx, "kube-chaos", "chaos")) == 0 }, itest.PollInterval)
}

// Stop mid-run deletes every pod.
func TestStopDeletesEveryPod(t *testing.T) {
	ctx := testContext(t)
	submit(t, ctx, itest.JobDoc("stopme", "kube-stop", `
  framework: custom
  image: registry.local/train:1.4
  command: [sleep, infinity]
  roles: {worker: {replicas: 3}}
`))
	waitJob(t, ctx, "kube-stop", "stopme", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	if n := len(jobPods(t, ctx, "kube-stop", "stopme")); n != 3 {
		t.Fatalf("%d pods before stop, want 3", n)
	}
	res, err := env.api.StopJob(ctx, "kube-stop", "stopme", "test")
	if err != nil || res.Phase != schemas.JobStopped {
		t.Fatalf("stop: %+v %v", res, err)
	}
	testutil.Eventually(t, itest.Left(ctx), "every pod deleted after stop", func() bool { return len(jobPods(t, ctx, "kube-stop", "stopme")) == 0 }, itest.PollInterval)
	j, err := env.api.GetJob(ctx, "kube-stop", "stopme")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range j.Status.Replicas {
		if r.Phase != schemas.ReplicaStopped {
			t.Errorf("replica %s %s, want Stopped", r.Name, r.Phase)
		}
	}
}

// The worker SIGKILLed while it creates a gang's pods: the restarted worker's retried
// launch leaves exactly one pod per replica, and the job completes.
func TestWorkerKilledWhileCreatingPods(t *testing.T) {
	ctx := testContext(t)
	const replicas = 24
	submit(t, ctx, kwokJob("many", "kube-restart", "3s", fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: %d}}
`, replicas)))
	seen := 0
	testutil.Eventually(t, itest.Left(ctx), "the first pods created", func() bool {
		seen = len(jobPods(t, ctx, "kube-restart", "many"))
		return seen > 0
	}, itest.PollInterval)
	stopWorker()
	t.Logf("worker killed with %d of %d pods created", seen, replicas)
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, "kube-restart", "many", "Running or terminal", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobRunning || j.Status.Phase.Terminal()
	})
	pods := jobPods(t, ctx, "kube-restart", "many")
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	if len(pods) != replicas || len(names) != replicas {
		t.Errorf("%d pods (%d names) after the restart, want exactly %d", len(pods), len(names), replicas)
	}
	for i := range replicas {
		if !names["many-worker-"+strconv.Itoa(i)+"-a0"] {
			t.Errorf("pod of replica %d missing", i)
		}
	}
	j := waitJob(t, ctx, "kube-restart", "many", "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}
}

// Spot-pool pods land only on spot-labelled nodes (the worker maps pool spot to a node
// selector and a toleration).
func TestSpotPoolPodsLandOnSpotNodes(t *testing.T) {
	ctx := testContext(t)
	spot := env.cluster.Nodes[len(env.cluster.Nodes)-1]
	node, err := env.cluster.Client.CoreV1().Nodes().Get(ctx, spot, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[spotLabel] = "true"
	if _, err := env.cluster.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	submit(t, ctx, itest.JobDoc("cheap", "kube-spot", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: spot}
  roles: {worker: {replicas: 3, resources: {gpu: 2}}}
`))
	waitJob(t, ctx, "kube-spot", "cheap", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	for _, p := range jobPods(t, ctx, "kube-spot", "cheap") {
		if p.Spec.NodeName != spot {
			t.Errorf("spot pod %s on %s, want %s", p.Name, p.Spec.NodeName, spot)
		}
		if p.Spec.NodeSelector[spotLabel] != "true" {
			t.Errorf("pod %s node selector %v", p.Name, p.Spec.NodeSelector)
		}
	}
	if _, err := env.api.StopJob(ctx, "kube-spot", "cheap", "done"); err != nil {
		t.Fatal(err)
	}
}

// Gang placement: a 6-replica job on a cluster with room for 4 never leaves pods bound
// past its placement timeout, says why, and starts once room appears.
func TestGangPlacementReleasesAndStartsWhenRoomAppears(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	// Two blockers of 4 GPUs each leave 16 of the 24 GPUs: room for 4 replicas of 4.
	const blockNS = "kube-gang-block"
	createNamespace(t, ctx, blockNS)
	for i := range 2 {
		gpu := corev1.ResourceList{"nvidia.com/gpu": resourceQuantity("4")}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "blocker-" + strconv.Itoa(i), Labels: map[string]string{"app": "blocker"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "main", Image: "registry.local/blocker:1", Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu},
			}}},
		}
		if _, err := cs.CoreV1().Pods(blockNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, itest.Left(ctx), "the blockers running", func() bool {
		l, err := cs.CoreV1().Pods(blockNS).List(ctx, metav1.ListOptions{})
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return err == nil && running == 2
	}, itest.PollInterval)

	submit(t, ctx, kwokJob("gang", "kube-gang", "12s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {placementTimeout: 3s}
  roles: {worker: {replicas: 6, resources: {gpu: 4}}}
`))
	j := waitJob(t, ctx, "kube-gang", "gang", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if j.Status.Reason != "PlacementTimeout" || !strings.Contains(j.Status.Message, "only 4 of 6 replicas were placed") {
		t.Errorf("queued: %s %q", j.Status.Reason, j.Status.Message)
	}
	// Released: no pod of the first attempt holds a GPU any more.
	if pods := jobPods(t, ctx, "kube-gang", "gang"); len(pods) != 0 {
		var names []string
		for _, p := range pods {
			names = append(names, p.Name+"@"+p.Spec.NodeName)
		}
		t.Errorf("pods still bound after the placement timeout: %v", names)
	}
	// Room appears: the next attempt is placed whole and the job succeeds.
	if err := cs.CoreV1().Pods(blockNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=blocker"}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, ctx, "kube-gang", "gang", "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Attempt < 1 {
		t.Fatalf("phase %s attempt %d: %s", j.Status.Phase, j.Status.Attempt, j.Status.Message)
	}
	for _, r := range j.Status.Replicas {
		if !strings.HasSuffix(r.Name, fmt.Sprintf("-a%d", j.Status.Attempt)) {
			t.Errorf("replica %s is not of attempt %d", r.Name, j.Status.Attempt)
		}
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// Environment from Secrets: a job names Secrets of its namespace and every pod takes its
// environment from them; the values never pass through the spec or the job's history.
func TestEnvFromSecrets(t *testing.T) {
	ctx := testContext(t)
	submit(t, ctx, itest.JobDoc("secretive", "kube-secret", `
  framework: custom
  image: registry.local/train:1.4
  command: [train]
  envFromSecrets: [s3-creds, wandb]
  roles: {worker: {replicas: 2}}
`))
	waitJob(t, ctx, "kube-secret", "secretive", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	for _, p := range jobPods(t, ctx, "kube-secret", "secretive") {
		var names []string
		for _, f := range p.Spec.Containers[0].EnvFrom {
			if f.SecretRef != nil {
				names = append(names, f.SecretRef.Name)
			}
		}
		if diff := cmp.Diff([]string{"s3-creds", "wandb"}, names); diff != "" {
			t.Errorf("pod %s envFrom secrets (-want +got):\n%s", p.Name, diff)
		}
	}
	if _, err := env.api.StopJob(ctx, "kube-secret", "secretive", "done"); err != nil {
		t.Fatal(err)
	}
}
