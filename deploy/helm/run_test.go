package helm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
)

// TestRenderedProcessesRun runs the chart's containers as processes, the way a kubelet
// would: the rendered args, the environment resolved from the rendered ConfigMap and
// Secrets, the Secret volumes written to files, against a real Temporal, NATS and S3
// (an embedded stack) and the test control plane. Two API servers come up healthy and
// accept the admin token the chart generated; a worker in namespaced mode, as the
// chart's service account with exactly the chart's RBAC (in-cluster configuration),
// runs a job in its namespace to completion. Temporal requires mutual TLS (the stack's
// TemporalTLS): both processes connect with the client certificate of the chart's
// temporal.tls.existingSecret, which a process without it cannot (devstack's tests).
func TestRenderedProcessesRun(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	// The chart's notifier delivers notifications, so the stack runs no dispatcher.
	stack := itest.StartStack(t, ctx, embedded.Config{NoWorker: true, NoNotifications: true, TemporalTLS: true})
	s := stack.Stack
	c := chartCase{name: "run", namespaced: true, namespaces: []string{"team-a"}, healthChecks: true}
	values := fmt.Sprintf(`
temporal: {address: %q, namespace: %q, tls: {enabled: true, existingSecret: temporal-mtls}}
nats: {urls: [%q], credentials: {user: %q, password: %q}}
s3: {endpoint: %q, region: %q, pathStyle: "true", accessKeyId: %q, secretAccessKey: %q}
rbac: {mode: namespaced, namespaces: [team-a]}
notifier: {webhookAllow: [127.0.0.1]}
secrets: {existingSecret: opendlc-secrets}
`, s.Temporal.Address, s.Temporal.Namespace, s.NATS.URL, devstack.NATSUserServer, s.NATS.Password(devstack.NATSUserServer),
		s.S3.Endpoint, s.S3.Region, s.S3.AccessKey, s.S3.SecretKey)
	objs := render(t, ctx, c.name, c.namespace(), values)
	if err := createNamespace(ctx, c.namespace()); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := apply(ctx, o, c.namespace()); err != nil {
			t.Fatal(err)
		}
	}
	k := newKubelet(t, objs)
	// The Secret an operator makes (e.g. with cert-manager) with the stack's client
	// certificate, as the kubelet would mount it.
	mtls := map[string]string{}
	for key, file := range map[string]string{"tls.crt": s.Temporal.TLS.CertFile, "tls.key": s.Temporal.TLS.KeyFile, "ca.crt": s.Temporal.TLS.CAFile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		mtls[key] = string(b)
	}
	k.secrets["temporal-mtls"] = mtls
	// The Secret of the secrets that documents name by reference (secrets.existingSecret),
	// one key per WORKSPACE.NAME, as an operator makes it.
	const hookSecret, platformSecret = "0123456789abcdef-hook", "0123456789abcdef-platform"
	k.secrets["opendlc-secrets"] = map[string]string{"chart-run.hook": hookSecret + "\n", "chart-run.platform": platformSecret}

	// Two API servers, as the Deployment's two replicas.
	server := k.container(c.fullname()+"-server", "server")
	token := k.secrets[c.fullname()+"-admin-token"]["admin-token"]
	var urls []string
	for i := range 2 {
		p := k.start(ctx, server, fmt.Sprintf("server-%d", i), nil)
		u := p.waitLine(t, ctx, regexp.MustCompile(`API listening on (\S+)`))
		urls = append(urls, u)
		checkProbes(t, ctx, fmt.Sprintf("server %d", i), server.ctr, map[string]string{
			"http": u, "metrics": strings.TrimSuffix(p.waitLine(t, ctx, metricsLine), "/metrics"),
		})
	}
	admin, err := dlc.New(urls[1], dlc.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	// The servers check tokens: one of the right form that no server installed is refused.
	stranger, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	other, err := dlc.New(urls[0], dlc.WithToken(stranger))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateWorkspace(ctx, api.Workspace{Name: "chart-stranger", Namespace: "team-a"}); err == nil {
		t.Fatal("a token the chart did not make created a workspace")
	}
	if _, err := admin.CreateWorkspace(ctx, api.Workspace{Name: "chart-run", Namespace: "team-a"}); err != nil {
		t.Fatalf("create a workspace with the chart's admin token on the second server: %v", err)
	}

	// The worker, in-cluster as the chart's service account.
	worker := k.container(c.fullname()+"-worker", "worker")
	_, cfg, err := env.cluster.ServiceAccountKubeconfig(ctx, c.namespace(), c.fullname()+"-worker", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	saDir := t.TempDir()
	ca, err := os.ReadFile(env.cluster.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(saDir, "token"), cfg.BearerToken)
	writeFile(t, filepath.Join(saDir, "ca.crt"), string(ca))
	apiURL, err := url.Parse(env.cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	w := k.start(ctx, worker, "worker", []string{
		"KUBERNETES_SERVICE_HOST=" + apiURL.Hostname(), "KUBERNETES_SERVICE_PORT=" + apiURL.Port(),
		kubebackend.EnvServiceAccountDir + "=" + saDir, "HOME=" + t.TempDir(),
	})
	w.waitLine(t, ctx, regexp.MustCompile(`worker started \((kubernetes) backend\)`))
	// The worker's probes, as the kubelet asks them: ready with Temporal and NATS.
	checkProbes(t, ctx, "worker", worker.ctr, map[string]string{
		"metrics": strings.TrimSuffix(w.waitLine(t, ctx, metricsLine), "/metrics"),
	})

	client, err := dlc.New(urls[0], dlc.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}

	// The notifier, whose rule's webhook is signed with the key of the mounted Secret;
	// and a trigger webhook whose secretRef the API servers resolve from it.
	notifier := k.container(c.fullname()+"-notifier", "notifier")
	n := k.start(ctx, notifier, "notifier", nil)
	n.waitLine(t, ctx, regexp.MustCompile(`(notification dispatcher started)`))
	checkProbes(t, ctx, "notifier", notifier.ctr, map[string]string{
		"metrics": strings.TrimSuffix(n.waitLine(t, ctx, metricsLine), "/metrics"),
	})
	hook := newSignedHook(t)
	if _, err := client.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: done, workspace: chart-run}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Succeeded]}
  webhook: {url: %q, secretRef: {name: hook}}
`, hook.url)); err != nil {
		t.Fatalf("rule: %v", err)
	}
	if _, err := client.ApplyTrigger(ctx, []byte(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: platform, workspace: chart-run}
spec:
  webhook: {secretRef: {name: platform}}
  action:
    job:
      framework: custom
      image: registry.local/tools:1
      command: [sh, -c, "true"]
      roles: {worker: {replicas: 1}}
`)); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	for _, tc := range []struct {
		key  string
		want int
	}{{"a-key-that-is-not-the-secret", http.StatusUnauthorized}, {platformSecret, http.StatusAccepted}} {
		if got := postSignedWebhook(t, ctx, urls[1], "chart-run", "platform", tc.key); got != tc.want {
			t.Fatalf("trigger webhook signed with %q: HTTP %d, want %d", tc.key, got, tc.want)
		}
	}

	itest.Submit(t, ctx, client, `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: chart
  workspace: chart-run
  annotations: {kwok.opendlc.io/complete-after: 2s}
spec:
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 1}}}
`)
	j := itest.WaitJob(t, ctx, client, "chart-run", "chart", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job: phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	t.Logf("job chart: %s in namespace team-a", j.Status.Phase)
	testutil.Eventually(t, itest.Left(ctx), "the notifier's delivery of job chart's success, signed with the mounted secret", func() bool {
		return hook.signedFor(hookSecret, `"job":"chart"`)
	}, 100*time.Millisecond)
}

// signedHook is a webhook receiver that keeps each request's body and signature.
type signedHook struct {
	url  string
	mu   sync.Mutex
	reqs []signedRequest
}

type signedRequest struct {
	body      []byte
	signature string
}

func newSignedHook(t *testing.T) *signedHook {
	h := &signedHook{}
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, signedRequest{body: body, signature: r.Header.Get(notify.HeaderSignature)})
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

// signedFor reports whether a request whose body contains want came signed with secret.
func (h *signedHook) signedFor(secret, want string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.reqs {
		if strings.Contains(string(r.body), want) && r.signature == notify.Sign([]byte(secret), r.body) {
			return true
		}
	}
	return false
}

// postSignedWebhook posts a delivery to a trigger's webhook, signed with key, and
// answers the status.
func postSignedWebhook(t *testing.T, ctx context.Context, apiURL, ws, name, key string) int {
	t.Helper()
	body := []byte(`{"ref": "refs/heads/main"}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	delivery := "chart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/workspaces/%s/triggers/%s/webhook", apiURL, ws, name), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(triggers.HeaderTimestamp, ts)
	req.Header.Set(triggers.HeaderDelivery, delivery)
	req.Header.Set(triggers.HeaderSignature, triggers.SignWebhook([]byte(key), ts, delivery, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metricsLine is what dlc server and dlc worker print of their metrics listener.
var metricsLine = regexp.MustCompile(`metrics on (\S+)`)

// checkProbes asks a container's readiness and liveness probes as a kubelet would: GET
// of the probe's path on the base URL of its named port (ports maps port names to base
// URLs), wanting 200. A container without both probes fails.
func checkProbes(t *testing.T, ctx context.Context, name string, ctr corev1.Container, ports map[string]string) {
	t.Helper()
	for kind, p := range map[string]*corev1.Probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("%s: no HTTP %s probe", name, kind)
		}
		base, ok := ports[p.HTTPGet.Port.String()]
		if !ok {
			t.Fatalf("%s: %s probe on port %s, not one of %v", name, kind, p.HTTPGet.Port.String(), ports)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p.HTTPGet.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %s probe: %v", name, kind, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s probe GET %s: %s", name, kind, base+p.HTTPGet.Path, resp.Status)
		}
		t.Logf("%s: %s probe GET %s%s: %s", name, kind, p.HTTPGet.Port.String(), p.HTTPGet.Path, resp.Status)
	}
}

// kubelet holds what a pod of the release reads: the rendered Deployments, and the
// data of the rendered ConfigMaps and Secrets.
type kubelet struct {
	t           *testing.T
	deployments map[string]*appsv1.Deployment
	configMaps  map[string]map[string]string
	secrets     map[string]map[string]string
}

func newKubelet(t *testing.T, objs []*unstructured.Unstructured) *kubelet {
	k := &kubelet{t: t, deployments: map[string]*appsv1.Deployment{},
		configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			k.deployments[o.GetName()] = typed[appsv1.Deployment](t, o)
		case "ConfigMap":
			k.configMaps[o.GetName()] = typed[corev1.ConfigMap](t, o).Data
		case "Secret":
			sec := typed[corev1.Secret](t, o)
			data := map[string]string{}
			for key, v := range sec.Data {
				data[key] = string(v)
			}
			maps.Copy(data, sec.StringData)
			k.secrets[o.GetName()] = data
		}
	}
	return k
}

// running is a started container and its output so far.
type running struct {
	name  string
	mu    sync.Mutex
	lines []string
}

// container returns a Deployment's container and its pod spec.
func (k *kubelet) container(deployment, name string) podContainer {
	k.t.Helper()
	d, ok := k.deployments[deployment]
	if !ok {
		k.t.Fatalf("no Deployment %s", deployment)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return podContainer{spec: d.Spec.Template.Spec, ctr: c}
		}
	}
	k.t.Fatalf("Deployment %s has no container %s", deployment, name)
	return podContainer{}
}

type podContainer struct {
	spec corev1.PodSpec
	ctr  corev1.Container
}

// start runs a container as a process: its volumes become directories (Secret volumes
// hold the Secret's files), its args point into them, its environment is resolved from
// the ConfigMaps and Secrets, and the API listens on a free loopback port.
func (k *kubelet) start(ctx context.Context, pc podContainer, name string, extraEnv []string) *running {
	t := k.t
	t.Helper()
	root := t.TempDir()
	mounts := map[string]string{}
	for _, m := range pc.ctr.VolumeMounts {
		dir := filepath.Join(root, m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = dir
		for _, v := range pc.spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			data, ok := k.secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("%s: volume %s: the release renders no Secret %s", name, v.Name, v.Secret.SecretName)
			}
			for key, val := range data {
				writeFile(t, filepath.Join(dir, key), val)
			}
		}
	}
	var args []string
	for _, a := range pc.ctr.Args {
		if strings.HasPrefix(a, "--addr=") {
			a = "--addr=127.0.0.1:0"
		}
		if strings.HasPrefix(a, "--metrics-addr=") {
			a = "--metrics-addr=127.0.0.1:0"
		}
		args = append(args, inMounts(a, mounts))
	}
	environ := append(os.Environ(), extraEnv...)
	for _, e := range pc.ctr.Env {
		environ = append(environ, e.Name+"="+k.envValue(name, e))
	}
	if pc.ctr.Command[0] != "dlc" {
		t.Fatalf("%s: command %q", name, pc.ctr.Command)
	}
	cmd := exec.CommandContext(ctx, env.dlc, args...)
	cmd.Env = environ
	cmd.Dir = root
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := &running{name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		<-done
		pr.Close()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, strings.Join(r.output(), "\n"))
		}
	})
	return r
}

// waitLine waits for a line of output that re matches and returns its first group.
func (r *running) waitLine(t *testing.T, ctx context.Context, re *regexp.Regexp) string {
	t.Helper()
	var got string
	err := testutil.Poll(ctx, 2*time.Minute, r.name+"'s line", func() error {
		for _, l := range r.output() {
			if m := re.FindStringSubmatch(l); m != nil {
				got = m[1]
				return nil
			}
		}
		return fmt.Errorf("%s: no line matching %s yet", r.name, re)
	})
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, strings.Join(r.output(), "\n"))
	}
	return got
}

func (r *running) output() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// envValue resolves one variable as the kubelet would.
func (k *kubelet) envValue(name string, e corev1.EnvVar) string {
	k.t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.ConfigMapKeyRef != nil:
		r := e.ValueFrom.ConfigMapKeyRef
		if v, ok := k.configMaps[r.Name][r.Key]; ok {
			return v
		}
		k.t.Fatalf("%s: %s: the release renders no ConfigMap %s with key %s", name, e.Name, r.Name, r.Key)
	case e.ValueFrom.SecretKeyRef != nil:
		r := e.ValueFrom.SecretKeyRef
		if v, ok := k.secrets[r.Name][r.Key]; ok {
			return v
		}
		k.t.Fatalf("%s: %s: the release renders no Secret %s with key %s", name, e.Name, r.Name, r.Key)
	}
	k.t.Fatalf("%s: %s: unsupported source %+v", name, e.Name, e.ValueFrom)
	return ""
}

// inMounts rewrites a flag's path value (--flag=/mount/path/file) under the
// directory standing in for the mount that holds it: the longest mount path that is
// the value or a parent of it, once. Replacing every mount path in turn would depend
// on the map's order: with /tmp and /etc/opendlc/admin-token both mounted, the
// second mount's directory (under /tmp) would be rewritten again.
func inMounts(arg string, mounts map[string]string) string {
	flag, value, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(flag, "-") {
		flag, value = "", arg
	}
	best := ""
	for path := range mounts {
		if (value == path || strings.HasPrefix(value, path+"/")) && len(path) > len(best) {
			best = path
		}
	}
	if best == "" {
		return arg
	}
	value = mounts[best] + strings.TrimPrefix(value, best)
	if flag == "" {
		return value
	}
	return flag + "=" + value
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
