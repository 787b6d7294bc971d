package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend/kube"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// podS3Endpoint is the --pod-s3-endpoint of these tests: a name only the cluster
// resolves, unlike the stack's loopback endpoint.
const podS3Endpoint = "http://s3.storage.svc:9000"

// startUp runs `dlc up --kubeconfig` (the opendlc-worker service account's, so the
// worker has exactly deploy/rbac.yaml's role) with extra arguments, waits for its
// banner and returns a client of its API (with the admin token), the banner and the
// state directory. The process gets SIGINT when the test ends.
func startUp(t *testing.T, ctx context.Context, extra ...string) (*dlc.Client, string, string) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"up", "--dir", filepath.Join(dir, "state"), "--addr", "127.0.0.1:0", "--ui=false",
		"--kubeconfig", env.workerKube}, extra...)
	cmd := exec.Command(env.dlcBin, args...)
	logf, err := os.Create(filepath.Join(env.dir, "dlc-up-"+t.Name()+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	type result struct {
		url   string
		lines []string
	}
	banner := make(chan result, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var r result
		for sc.Scan() {
			line := sc.Text()
			r.lines = append(r.lines, line)
			if f := strings.Fields(line); len(f) == 2 && f[0] == "API" {
				r.url = f[1]
			}
			if strings.HasPrefix(line, "Submit a job:") {
				break
			}
		}
		banner <- r
		_, _ = io.Copy(io.Discard, out) // keep the pipe drained
	}()
	var r result
	select {
	case r = <-banner:
	case <-ctx.Done():
		t.Fatalf("dlc up printed no banner (log in %s)", logf.Name())
	}
	url := r.url
	if url == "" {
		t.Fatalf("dlc up exited or printed no API address (log in %s)", logf.Name())
	}
	token, err := auth.ReadTokenFile(filepath.Join(dir, "state", auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlc.New(url, dlc.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c, strings.Join(r.lines, "\n"), filepath.Join(dir, "state")
}

// s3Job is a one-replica job of workspace ws that checkpoints to S3; kwok completes its
// pod after 20 s, time enough for launchedPod to see it before the job ends and its pod
// is deleted (a minute before: the dlc up test waited it out for its three jobs).
func s3Job(ws, name string) string {
	return kwokJob(name, ws, "20s", fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [python, train.py]
  roles: {worker: {replicas: 1}}
  checkpoint: {uri: "s3://dlc/workspaces/%s/%s"}
  logs: {forward: false}
`, ws, name))
}

// launchedPod submits job name through c and returns its pod once it exists.
func launchedPod(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) corev1.Pod {
	t.Helper()
	itest.Submit(t, ctx, c, s3Job(ws, name))
	var pods []corev1.Pod
	testutil.Eventually(t, itest.Left(ctx), name+"'s pod", func() bool {
		pods = jobPods(t, ctx, ws, name)
		return len(pods) == 1
	}, itest.PollInterval)
	return pods[0]
}

// s3Secret reads the workspace Secret as the cluster's administrator.
func s3Secret(t *testing.T, ctx context.Context, ns string) *corev1.Secret {
	t.Helper()
	s, err := env.cluster.Client.CoreV1().Secrets(ns).Get(ctx, kube.S3SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkS3Env checks that pod takes every S3 variable from the workspace Secret and
// holds none of creds (the stack's S3 root keys) in plain text.
func checkS3Env(t *testing.T, pod corev1.Pod, creds ...string) {
	t.Helper()
	c := pod.Spec.Containers[0]
	seen := map[string]int{}
	for _, e := range c.Env {
		seen[e.Name]++
		for _, cred := range creds {
			if strings.Contains(e.Value, cred) {
				t.Errorf("pod %s: %s holds the S3 credentials in plain text", pod.Name, e.Name)
			}
		}
		switch e.Name {
		case kube.EnvS3Endpoint, kube.EnvS3Region, kube.EnvS3AccessKeyID, kube.EnvS3SecretAccessKey:
			ref := e.ValueFrom
			if e.Value != "" || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != kube.S3SecretName || ref.SecretKeyRef.Key != e.Name {
				t.Errorf("pod %s: %s = %q from %+v, want key %s of Secret %s", pod.Name, e.Name, e.Value, ref, e.Name, kube.S3SecretName)
			}
		case "DLC_CHECKPOINT_URI":
			if !strings.HasPrefix(e.Value, "s3://dlc/workspaces/") {
				t.Errorf("pod %s: DLC_CHECKPOINT_URI %q", pod.Name, e.Value)
			}
		}
	}
	for _, name := range []string{kube.EnvS3Endpoint, kube.EnvS3Region, kube.EnvS3AccessKeyID, kube.EnvS3SecretAccessKey, "DLC_CHECKPOINT_URI"} {
		if seen[name] != 1 {
			t.Errorf("pod %s: %s set %d times, want once", pod.Name, name, seen[name])
		}
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("pod %s: envFrom %+v, want none", pod.Name, c.EnvFrom)
	}
}

// `dlc up --kubeconfig --pod-s3-endpoint`: a job with a checkpoint location gets a pod
// whose S3 variables all come from the Secret opendlc-s3 of its workspace's namespace,
// which holds the configured pod endpoint and the workspace's own gateway account (dlc up
// isolates storage by default); the next launches
// leave one Secret, write nothing when it is unchanged and put back a Secret edited by
// hand. The worker, with deploy/rbac.yaml's role only, may write that Secret and no other,
// and still read none.
func TestDlcUpKubeconfigGivesPodsS3FromTheWorkspaceSecret(t *testing.T) {
	// Parallel: its jobs run on a dlc up of its own, in a workspace of their own,
	// without GPUs, and it touches neither the nodes nor the shared worker.
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	c, banner, state := startUp(t, ctx, "--pod-s3-endpoint", podS3Endpoint)
	// The stack's root keys, generated for it into its state directory.
	rootAccess, rootSecret, err := devstack.ReadS3RootKeys(filepath.Join(state, "s3"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "Pod S3       "+podS3Endpoint) {
		t.Errorf("banner does not name the pod endpoint:\n%s", banner)
	}
	const ws = "kube-s3"

	first := launchedPod(t, ctx, c, ws, "ckpt-a")
	checkS3Env(t, first, rootAccess, rootSecret)
	sec := s3Secret(t, ctx, ws)
	// dlc up isolates storage: the Secret holds the workspace's own gateway account,
	// not the stack's.
	secret := string(sec.Data[kube.EnvS3SecretAccessKey])
	if secret == "" || secret == rootSecret {
		t.Errorf("secret key of the workspace Secret: %q, want the workspace account's", secret)
	}
	want := map[string]string{
		kube.EnvS3Endpoint: podS3Endpoint, kube.EnvS3Region: devstack.DevRegion,
		kube.EnvS3AccessKeyID: storage.AccountName(ws), kube.EnvS3SecretAccessKey: secret,
	}
	checkSecretData(t, sec, want)
	if sec.Labels[kube.LabelManagedBy] != kube.ManagedByValue || sec.Labels[kube.LabelWorkspace] != ws {
		t.Errorf("secret labels %v", sec.Labels)
	}

	// The next job of the workspace: the Secret is applied again, unchanged.
	checkS3Env(t, launchedPod(t, ctx, c, ws, "ckpt-b"), rootAccess, rootSecret)
	if again := s3Secret(t, ctx, ws); again.ResourceVersion != sec.ResourceVersion {
		t.Errorf("secret rewritten by an unchanged launch: resource version %s, then %s", sec.ResourceVersion, again.ResourceVersion)
	}

	// Someone edits it by hand; the next launch puts it back.
	patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, kube.EnvS3SecretAccessKey, "dGFtcGVyZWQ=") // "tampered"
	if _, err := env.cluster.Client.CoreV1().Secrets(ws).Patch(ctx, kube.S3SecretName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := string(s3Secret(t, ctx, ws).Data[kube.EnvS3SecretAccessKey]); got != "tampered" {
		t.Fatalf("the edit did not take: %q", got)
	}
	checkS3Env(t, launchedPod(t, ctx, c, ws, "ckpt-c"), rootAccess, rootSecret)
	checkSecretData(t, s3Secret(t, ctx, ws), want)
	list, err := env.cluster.Client.CoreV1().Secrets(ws).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelManagedBy + "=" + kube.ManagedByValue})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d OpenDLC secrets in %s, want 1", len(list.Items), ws)
	}

	// The jobs run to the end on that Secret.
	for _, name := range []string{"ckpt-a", "ckpt-b", "ckpt-c"} {
		j := itest.WaitJob(t, ctx, c, ws, name, "Succeeded", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
		if j.Status.Phase != schemas.JobSucceeded {
			t.Errorf("%s: %s (%s)", name, j.Status.Phase, j.Status.Message)
		}
	}
	checkWorkerSecretRights(t, ctx, ws)
}

func checkSecretData(t *testing.T, sec *corev1.Secret, want map[string]string) {
	t.Helper()
	if len(sec.Data) != len(want) {
		t.Errorf("secret keys %d, want %d", len(sec.Data), len(want))
	}
	for k, v := range want {
		if got := string(sec.Data[k]); got != v {
			t.Errorf("secret %s = %q, want %q", k, got, v)
		}
	}
}

// checkWorkerSecretRights: as the worker, the S3 Secret can be patched, another
// Secret cannot, and no Secret can be read.
func checkWorkerSecretRights(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	secrets := cs.CoreV1().Secrets(ns)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	noop := []byte(`{"metadata":{"labels":{"opendlc.io/check":"x"}}}`)
	if _, err := secrets.Patch(ctx, kube.S3SecretName, types.MergePatchType, noop, dry); err != nil {
		t.Errorf("the worker cannot patch %s: %v", kube.S3SecretName, err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-db", Namespace: ns}, StringData: map[string]string{"password": "p"}}
	if _, err := env.cluster.Client.CoreV1().Secrets(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Patch(ctx, "team-db", types.MergePatchType, noop, dry); !apierrors.IsForbidden(err) {
		t.Errorf("patching another secret: %v, want forbidden", err)
	}
	for _, name := range []string{kube.S3SecretName, "team-db"} {
		if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("reading secret %s: %v, want forbidden", name, err)
		}
	}
}

// `dlc worker --kubeconfig --pod-s3-endpoint`: the worker writes its own S3 account
// (from its environment) with the pod endpoint in place of its own endpoint into the
// workspace Secret, and the pods take all four variables from it rather than the plain
// DLC_S3_ENDPOINT and AWS_REGION a worker without the flag passes.
func TestWorkerPodS3EndpointGivesPodsS3FromTheWorkspaceSecret(t *testing.T) {
	// Parallel: a stack and a worker of its own, one pod without GPUs in a workspace of
	// its own; it touches neither the nodes nor the shared worker.
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	stack := itest.StartStack(t, ctx, embedded.Config{NoWorker: true})
	cmd := exec.Command(env.dlcBin, itest.WorkerArgs(stack, "--kubeconfig", env.workerKube, "--pod-s3-endpoint", podS3Endpoint)...)
	cmd.Env = itest.WorkerEnv(stack)
	logf, err := os.Create(filepath.Join(env.dir, "worker-"+t.Name()+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
	})
	const ws = "kube-s3-worker"
	s := stack.Stack.S3
	checkS3Env(t, launchedPod(t, ctx, itest.AdminClient(t, stack), ws, "ckpt-w"), s.AccessKey, s.SecretKey)
	checkSecretData(t, s3Secret(t, ctx, ws), map[string]string{
		kube.EnvS3Endpoint: podS3Endpoint, kube.EnvS3Region: s.Region,
		kube.EnvS3AccessKeyID: s.AccessKey, kube.EnvS3SecretAccessKey: s.SecretKey,
	})
}
