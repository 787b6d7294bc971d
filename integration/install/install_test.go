// Package install installs OpenDLC with its own Helm chart and its own image on a
// Kubernetes cluster with real nodes (kubestack: kubelets with containerd and runc), the
// way a user installs it on an existing cluster with existing Temporal, NATS and S3.
//
// The image is the one `task image` builds (images.BuildDLC), imported into both nodes'
// containerd under its version tag opendlc.local/dlc:VERSION, the chart's default; a
// second tag of the same image is what `helm upgrade` moves to; the training image (a
// PyTorch DDP job's) and busybox are imported too. Temporal, NATS and S3 run in the
// cluster as pods of images the project builds from their Go modules
// (images.Component: the temporal CLI's dev server on SQLite, nats-server with
// JetStream, the versitygw S3 gateway), each in namespace opendlc-deps with its state in
// an emptyDir and a headless Service, which the cluster's DNS resolves to the pod's
// address: the chart is pointed at <svc>.opendlc-deps.svc.cluster.local as at a user's
// existing in-cluster services, with the NATS user and the S3 keys in Secrets made
// before the install. The host checks the DDP job's checkpoint in S3 and its events in
// NATS's DLC_EVENTS stream on those pods' addresses, over the nodes' bridge.
//
// The test cluster has no kube-proxy, so the Service address of the Kubernetes API
// (10.96.0.1) routes nowhere from a pod. The worker's in-cluster configuration reaches
// the API server instead through an ExposeToPods forwarder, named by
// kubernetes.default.svc (a name of the API server's certificate) in the pod's
// /etc/hosts (worker.hostAliases) with KUBERNETES_SERVICE_HOST and _PORT set to it
// (worker.extraEnv); everything else of the in-cluster configuration (the service
// account's token and CA, the chart's RBAC) is as on any cluster. The host reaches the
// API with `kubectl port-forward` to the server's Service, as docs/production.md's step
// 6 does (through the API server and the pod's kubelet): the test cluster has no
// NodePort proxy either. Steps 3 and 6 run their kubectl commands (kubectl built from
// the control plane's module).
//
// Needs root, like kubestack's real nodes; clusters with real nodes take a machine-wide
// lock, so this waits while another package's cluster runs.
package install

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/checkpoint"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/internal/tools"
	"github.com/opendlc/opendlc/kubestack"
)

const (
	release   = "opendlc"
	namespace = "opendlc-install"
	// upgradeTag is the second tag of the same image, what helm upgrade moves to.
	upgradeTag = "install-upgrade"
)

func TestHelmInstallRunsJobsUpgradesAndUninstalls(t *testing.T) {
	ctx := itest.Context(t, 30*time.Minute)
	// A short directory: containerd's sockets under it must fit a unix socket path.
	dir, err := os.MkdirTemp("", "dlcinst-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	// The image, busybox (the job's and the node health checks' image), Temporal's,
	// NATS's and S3's images and helm.
	type built struct {
		dlc      images.DLCImage
		busybox  images.Image
		training images.TrainingImages
		deps     depImages
		helm     string
		kubectl  string
		dlcBin   string
		err      error
	}
	ready := make(chan built, 1)
	go func() {
		var b built
		if b.dlc, b.err = images.BuildDLC(ctx, images.DLCOptions{Tags: []string{upgradeTag}}); b.err != nil {
			ready <- b
			return
		}
		if b.deps, b.err = buildDepImages(ctx); b.err != nil {
			ready <- b
			return
		}
		if b.busybox, b.err = images.Busybox(ctx); b.err != nil {
			ready <- b
			return
		}
		if b.training, b.err = images.Training(ctx); b.err != nil {
			ready <- b
			return
		}
		if b.helm, b.err = tools.Ensure(ctx, "helm"); b.err != nil {
			ready <- b
			return
		}
		if b.kubectl, b.err = tools.Ensure(ctx, "kubectl"); b.err != nil {
			ready <- b
			return
		}
		b.dlcBin = filepath.Join(dir, "dlc")
		b.err = itest.Build(ctx, "./cmd/dlc", b.dlcBin)
		ready <- b
	}()
	b := <-ready
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("image %s (version %s, revision %s), refs %v", b.dlc.Ref, b.dlc.Version, b.dlc.Revision, b.dlc.Refs)

	start := time.Now()
	var cluster *kubestack.Cluster
	cluster, err = kubestack.Start(ctx, kubestack.Options{
		Dir: filepath.Join(dir, "cluster"), Nodes: -1, RealNodes: 2,
		Images: append([]string{b.dlc.Tarball, b.busybox.Tarball, b.training.Root.Tarball}, b.deps.tarballs()...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close() })
	t.Logf("cluster with 2 real nodes ready in %s", time.Since(start).Round(100*time.Millisecond))

	// Temporal, NATS and S3, as pods of the cluster.
	d := startDeps(t, ctx, cluster, b.deps)

	// The Kubernetes API, as the worker's pods reach it (the package comment).
	server, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	apiServer, err := cluster.ExposeToPods(server.Host)
	if err != nil {
		t.Fatalf("expose kube-apiserver: %v", err)
	}
	_, apiPort, err := net.SplitHostPort(apiServer)
	if err != nil {
		t.Fatal(err)
	}

	// The credentials, in Secrets made before the install: docs/production.md's step 3,
	// its kubectl commands.
	k := kubectl{bin: b.kubectl, kubeconfig: cluster.AdminKubeconfig}
	k.run(t, ctx, "create", "namespace", namespace)
	k.run(t, ctx, "-n", namespace, "create", "secret", "generic", "opendlc-nats",
		"--from-literal=user="+natsUser, "--from-literal=password="+d.NATSPassword)
	k.run(t, ctx, "-n", namespace, "create", "secret", "generic", "opendlc-s3",
		"--from-literal=AWS_ACCESS_KEY_ID="+d.S3AccessKey, "--from-literal=AWS_SECRET_ACCESS_KEY="+d.S3SecretKey)
	values := fmt.Sprintf(`
image: {pullPolicy: Never}
temporal: {address: %q, namespace: %q}
nats:
  urls: ["nats://%s"]
  credentials: {existingSecret: opendlc-nats, existingSecretType: userPassword}
s3:
  endpoint: "http://%s"
  region: %q
  pathStyle: "true"
  existingSecret: opendlc-s3
  podEndpoint: "http://%s"
server:
  resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 512Mi}}
worker:
  resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 1Gi}}
  extraArgs: [--health-probe-image, %q]
  extraEnv:
    - {name: KUBERNETES_SERVICE_HOST, value: kubernetes.default.svc}
    - {name: KUBERNETES_SERVICE_PORT, value: %q}
  hostAliases: [{ip: %q, hostnames: [kubernetes.default.svc]}]
`, d.Temporal, temporalNamespace, d.NATS, d.S3, devstack.DevRegion, d.S3, b.busybox.Ref, apiPort, kubestack.HostIP)
	valuesFile := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, b.helm, append(args, "--kubeconfig", cluster.AdminKubeconfig, "--namespace", namespace)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, "helm-cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(dir, "helm-data"))
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Logf("pods:\n%s", describePods(ctx, cluster))
			t.Fatalf("helm %s: %v\n%s%s", args[0], err, stdout.String(), stderr.String())
		}
		t.Logf("helm %s: %s", args[0], time.Since(start).Round(100*time.Millisecond))
		return stdout.String()
	}
	chart := filepath.Join(itest.Root(), "deploy", "helm", "opendlc")

	// helm install into a fresh namespace; --wait returns once every pod is ready, which
	// each is only while it reaches Temporal and NATS (the readiness probes).
	helm("install", release, chart, "--create-namespace", "--values", valuesFile, "--wait", "--timeout", "8m")
	wantImage := images.Domain + "/dlc:" + b.dlc.Version
	checkPodsReady(t, ctx, cluster, 5, wantImage)

	// The API, reached through a port-forward, with the token the chart generated.
	token := k.adminToken(t, ctx)
	client := k.apiClient(t, ctx, token)
	who, err := client.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("whoami through the installed API: %+v", who)
	// The dlc CLI on the host, as docs/production.md's step 6.
	cli := exec.CommandContext(ctx, b.dlcBin, "--server", k.apiURL(t, ctx), "whoami")
	cli.Env = append(os.Environ(), "DLC_TOKEN="+token)
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "admin") {
		t.Fatalf("dlc whoami: %v\n%s", err, out)
	} else {
		t.Logf("dlc whoami:\n%s", out)
	}
	const ws = "install"
	if _, err := client.CreateWorkspace(ctx, api.Workspace{Name: ws}); err != nil {
		t.Fatal(err)
	}

	// A PyTorch DDP job of 2 replicas (the DDP example, gloo) on the training image, run
	// as pods by the in-cluster worker; the Python library in the pods writes its
	// checkpoints to S3 with the credentials the worker gives the workspace's pods.
	uri := "s3://dlc/workspaces/" + ws + "/checkpoints/ddp"
	itest.Submit(t, ctx, client, itest.JobDoc("ddp", ws, fmt.Sprintf(`
  framework: pytorch
  image: %s
  command: [/usr/bin/python3, examples/pytorch/ddp/train.py]
  args: [--steps, "10", --step-sleep, "0.2", --hidden, "16", --checkpoint-every, "5"]
  env: [{name: PYTHONPATH, value: python}, {name: OMP_NUM_THREADS, value: "1"}]
  roles:
    master: {replicas: 1, resources: {cpu: 500m, memory: 1Gi}}
    worker: {replicas: 1, resources: {cpu: 500m, memory: 1Gi}}
  checkpoint: {uri: %q, keep: 3}
  timeout: 8m
`, b.training.Root.Ref, uri)))
	j := waitTerminal(t, ctx, client, ws, "ddp")
	if j.Status.Phase != "Succeeded" {
		t.Fatalf("job ddp: %s (%s: %s)", j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	checkEvents(t, ctx, client, ws, "ddp")
	d.checkStreamEvents(t, ctx, ws, "ddp")
	store, err := checkpoint.NewStore(d.checkpointConfig())
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Latest(ctx, uri)
	if err != nil {
		t.Fatalf("the DDP job's checkpoint in S3: %v", err)
	}
	if m.Step < 5 {
		t.Errorf("latest checkpoint at step %d, want one at step 5 or later", m.Step)
	}
	t.Logf("job ddp: latest checkpoint in S3 at step %d", m.Step)

	// A worker that lost NATS is not ready: with the NATS server's container stopped the
	// worker pods leave Ready (their readiness probe, /readyz); with it back in the same
	// pod, on the same address and store, they are ready again.
	d.stopNATS(t, ctx, cluster)
	waitWorkersReady(t, ctx, cluster, false)
	d.startNATS(t, ctx, cluster, b.deps["nats-server"].Ref)
	waitWorkersReady(t, ctx, cluster, true)

	// helm upgrade to the second tag while a job runs: the job finishes once, nothing lost.
	// The job runs until the test has seen the upgrade done (it polls a gate on the
	// machine, exposed to the pods), so that it spans the whole upgrade without a fixed
	// sleep that outlasts it.
	gate := openGate(t, cluster)
	itest.Submit(t, ctx, client, shellJob("during-upgrade", ws, b.busybox.Ref,
		"until wget -q -O /dev/null http://"+gate.addr+"/open; do sleep 1; done; echo done"))
	itest.WaitJob(t, ctx, client, ws, "during-upgrade", "Running", func(j *api.Job) bool { return j.Status.Phase == "Running" })
	helm("upgrade", release, chart, "--values", valuesFile, "--set", "image.tag="+upgradeTag, "--wait", "--timeout", "8m")
	checkPodsReady(t, ctx, cluster, 5, images.Domain+"/dlc:"+upgradeTag)
	client = k.apiClient(t, ctx, token)
	// The upgrade happened while the job ran: it is not over yet.
	if j, err := client.GetJob(ctx, ws, "during-upgrade"); err != nil {
		t.Fatal(err)
	} else if j.Status.Phase.Terminal() {
		t.Fatalf("job during-upgrade ended (%s) before the upgrade was done: it did not run across it", j.Status.Phase)
	}
	if n := gate.polls.Load(); n == 0 {
		t.Fatal("the job never polled the gate: it was not running through the upgrade")
	} else {
		t.Logf("the job polled the gate %d times before and during the upgrade", n)
	}
	gate.open.Store(true)
	j = waitTerminal(t, ctx, client, ws, "during-upgrade")
	if j.Status.Phase != "Succeeded" {
		t.Fatalf("job during-upgrade: %s (%s: %s)", j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	if j.Status.Restarts != 0 {
		t.Errorf("job during-upgrade restarted %d times across the upgrade", j.Status.Restarts)
	}
	checkEvents(t, ctx, client, ws, "during-upgrade")
	d.checkStreamEvents(t, ctx, ws, "during-upgrade")

	// helm uninstall: no pod of the release is left, the admin token Secret is.
	helm("uninstall", release, "--wait", "--timeout", "5m")
	testutil.Eventually(t, itest.Left(ctx), "no pod of the release left", func() error {
		pods, err := cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	}, itest.PollInterval)
	if got := k.adminToken(t, ctx); got != token {
		t.Error("the admin token Secret changed across helm uninstall")
	}
}

// gate is an HTTP endpoint on the machine that the pods reach (ExposeToPods): GET /open
// answers 404 until open is set, then 200; polls counts the requests.
type gate struct {
	addr  string
	open  atomic.Bool
	polls atomic.Int64
}

func openGate(t *testing.T, cluster *kubestack.Cluster) *gate {
	t.Helper()
	g := &gate{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.polls.Add(1)
		if r.URL.Path != "/open" || !g.open.Load() {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("open\n"))
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if g.addr, err = cluster.ExposeToPods(u.Host); err != nil {
		t.Fatalf("expose the gate: %v", err)
	}
	return g
}

// shellJob is a custom 2-replica job on image running command with sh -c.
func shellJob(name, ws, image, command string) string {
	return itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  image: %s
  command: [sh, -c, %q]
  roles: {worker: {replicas: 2, resources: {cpu: "100m", memory: 64Mi}}}
  timeout: 5m
`, image, command))
}

func waitTerminal(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) *api.Job {
	t.Helper()
	return itest.WaitJob(t, ctx, c, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
}

// checkEvents reads the job's events from NATS (through the installed API, which reads
// the DLC_EVENTS stream): a phase event reaching Succeeded, and no event twice.
func checkEvents(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) {
	t.Helper()
	seen := map[string]int{}
	var types []string
	succeeded := false
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := c.Events(rctx, ws, dlc.EventOptions{Job: name}, func(e events.Event) error {
		seen[e.ID]++
		types = append(types, e.Type)
		if strings.Contains(string(e.Data), "Succeeded") {
			succeeded = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("job %s: event %s delivered %d times", name, id, n)
		}
	}
	if !succeeded {
		t.Errorf("job %s: events %v, none saying Succeeded", name, types)
	}
	t.Logf("job %s: %d events: %v", name, len(types), types)
}

// checkPodsReady checks that the release's n pods run image, each Running and ready.
func checkPodsReady(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, n int, image string) {
	t.Helper()
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("%d pods of the release Running and ready on %s", n, image), func() error {
		pods, err := cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return err
		}
		var good []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) && p.Spec.Containers[0].Image == image {
				good = append(good, p.Name+" on "+p.Spec.NodeName)
			}
		}
		if len(good) != n || len(pods.Items) != n {
			return fmt.Errorf("%d of %d pods good: %v", len(good), len(pods.Items), good)
		}
		t.Logf("pods Running and ready: %v", good)
		return nil
	}, itest.PollInterval)
}

// waitWorkersReady waits until every worker pod of the release is ready (want true) or
// none is (want false).
func waitWorkersReady(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, want bool) {
	t.Helper()
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("every worker pod ready=%v", want), func() error {
		pods, err := cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=worker"})
		if err != nil {
			return err
		}
		var states []string
		for _, p := range pods.Items {
			if podReady(&p) != want {
				states = append(states, fmt.Sprintf("%s ready=%v", p.Name, podReady(&p)))
			}
		}
		if len(pods.Items) == 0 || len(states) > 0 {
			return fmt.Errorf("%d worker pods, not yet: %v", len(pods.Items), states)
		}
		t.Logf("%d worker pods ready=%v", len(pods.Items), want)
		return nil
	}, itest.PollInterval)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubectl runs the kubectl built from the control plane's module (tools/kube) as the
// cluster's administrator: the commands of docs/production.md.
type kubectl struct{ bin, kubeconfig string }

// run runs kubectl with args and returns its standard output; a failure fails the test.
func (k kubectl) run(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// adminToken reads the admin token the chart generated, as docs/production.md's step 6
// does (kubectl get secret ... -o jsonpath='{.data.admin-token}' | base64 -d).
func (k kubectl) adminToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	enc := k.run(t, ctx, "-n", namespace, "get", "secret", release+"-admin-token", "-o", "jsonpath={.data.admin-token}")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		t.Fatalf("admin token %q: %v", enc, err)
	}
	tok := string(raw)
	if _, err := auth.ParseToken(tok); err != nil {
		t.Fatalf("admin token: %v", err)
	}
	return tok
}

// apiClient is a client of the API through a port-forward to the server's Service
// (apiURL).
func (k kubectl) apiClient(t *testing.T, ctx context.Context, token string) *dlc.Client {
	t.Helper()
	c, err := dlc.New(k.apiURL(t, ctx), dlc.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forwarding is kubectl port-forward's line naming the local port it listens on.
var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> `)

// apiURL is the API's URL through `kubectl port-forward service/opendlc-server :80`,
// docs/production.md's step 6 on a free local port (kubectl resolves the Service to a
// ready pod and its target port, and forwards through the API server and the pod's
// kubelet, which has containerd dial the port in the pod's network namespace). The
// forward ends with the test, or when its pod goes away (helm upgrade replaces it).
func (k kubectl) apiURL(t *testing.T, ctx context.Context) string {
	t.Helper()
	fctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(fctx, k.bin, "--kubeconfig", k.kubeconfig, "-n", namespace, "port-forward",
		"--address", "127.0.0.1", "service/"+release+"-server", ":80")
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		close(port)
	}()
	select {
	case p, ok := <-port:
		if !ok {
			t.Fatalf("kubectl port-forward ended before it listened: %s", stderr.String())
		}
		t.Logf("kubectl port-forward service/%s-server :80 listens on 127.0.0.1:%s", release, p)
		return "http://127.0.0.1:" + p
	case <-time.After(time.Minute):
		t.Fatalf("kubectl port-forward did not listen within a minute: %s", stderr.String())
	}
	return ""
}

// describePods says where each pod of the namespace stands, for a failed helm.
func describePods(ctx context.Context, cluster *kubestack.Cluster) string {
	pods, err := cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s %s on %s:", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
			if lt := cs.LastTerminationState.Terminated; lt != nil {
				fmt.Fprintf(&b, " last exit %d %s: %s", lt.ExitCode, lt.Reason, lt.Message)
			}
		}
		b.WriteString("\n")
		for _, c := range p.Spec.Containers {
			raw, err := cluster.Client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: new(int64(30))}).Do(ctx).Raw()
			fmt.Fprintf(&b, "  logs of %s (%v):\n%s\n", c.Name, err, raw)
		}
	}
	return b.String()
}
