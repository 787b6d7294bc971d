package kube

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// TestPodSpecOnKubernetes submits a job with spec.pod through the API to the worker of
// deploy/rbac.yaml: its pods run as the image's user (the worker's default policy), as
// the job's service account, with its image pull secret, a memory-backed /dev/shm of
// the job's size, and emptyDir, configMap and secret volumes, all accepted by the real
// API server. A job whose pool does not allow a host path fails as a configuration
// error naming the field and creates no pod; a spec with two volume sources is refused
// by the API, naming the field.
func TestPodSpecOnKubernetes(t *testing.T) {
	ctx := testContext(t)
	const ws = "kube-podspec"
	cs := env.cluster.Client
	create := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{})
	create("namespace", err)
	_, err = cs.CoreV1().ServiceAccounts(ws).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer"}}, metav1.CreateOptions{})
	create("service account", err)
	_, err = cs.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ngc"}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"nvcr.io":{"auth":"JG9hdXRodG9rZW46eA=="}}}`}}, metav1.CreateOptions{})
	create("pull secret", err)
	_, err = cs.CoreV1().ConfigMaps(ws).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "train-config"}, Data: map[string]string{"lr": "0.1"}}, metav1.CreateOptions{})
	create("config map", err)
	_, err = cs.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf-token"}, StringData: map[string]string{"token": "x"}}, metav1.CreateOptions{})
	create("secret", err)

	submit(t, ctx, itest.JobDoc("ngc", ws, `
  framework: pytorch
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 1}}}
  logs: {forward: false}
  pod:
    serviceAccountName: trainer
    imagePullSecrets: [ngc]
    shmSize: 8Gi
    volumes:
    - {name: scratch, mountPath: /scratch, emptyDir: {sizeLimit: 20Gi}}
    - {name: cfg, mountPath: /etc/train, readOnly: true, configMap: {name: train-config}}
    - {name: token, mountPath: /var/run/hf, readOnly: true, secret: {secretName: hf-token}}
`))
	waitJob(t, ctx, ws, "ngc", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	pods := jobPods(t, ctx, ws, "ngc")
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	for _, p := range pods {
		checkPodSpec(t, p)
	}
	if _, err := env.api.StopJob(ctx, ws, "ngc", "done"); err != nil {
		t.Fatal(err)
	}

	// The quota pool's policy (the worker's default) allows no host path.
	submit(t, ctx, itest.JobDoc("hostpath", ws, `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
  logs: {forward: false}
  pod:
    volumes: [{name: nvme, mountPath: /nvme, hostPath: {path: /mnt/nvme}}]
`))
	j := waitJob(t, ctx, ws, "hostpath", "terminal", terminal)
	if j.Status.Phase != schemas.JobFailed || !strings.Contains(j.Status.Message, "spec.pod.volumes[0].hostPath.path") {
		t.Errorf("hostpath job: %s %q, want Failed naming spec.pod.volumes[0].hostPath.path", j.Status.Phase, j.Status.Message)
	}
	t.Logf("refused by policy: %s", j.Status.Message)
	if n := len(jobPods(t, ctx, ws, "hostpath")); n != 0 {
		t.Errorf("the refused job created %d pods", n)
	}

	_, err = env.api.SubmitJob(ctx, []byte(itest.JobDoc("twosources", ws, `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
  pod:
    volumes: [{name: x, mountPath: /x, emptyDir: {}, secret: {secretName: hf-token}}]
`)))
	if err == nil || !strings.Contains(err.Error(), "spec.pod.volumes[0]") {
		t.Errorf("two volume sources: %v, want an error naming spec.pod.volumes[0]", err)
	}
	if _, err := env.api.GetJob(ctx, ws, "twosources"); err == nil {
		t.Error("the refused job exists")
	}
}

// checkPodSpec checks a pod of TestPodSpecOnKubernetes's job.
func checkPodSpec(t *testing.T, p corev1.Pod) {
	t.Helper()
	if p.Spec.SecurityContext != nil && (p.Spec.SecurityContext.RunAsNonRoot != nil || p.Spec.SecurityContext.RunAsUser != nil) {
		t.Errorf("%s: security context %+v, want the image's user", p.Name, p.Spec.SecurityContext)
	}
	c := p.Spec.Containers[0]
	if c.SecurityContext != nil {
		t.Errorf("%s: container security context %+v, want none", p.Name, c.SecurityContext)
	}
	if p.Spec.ServiceAccountName != "trainer" {
		t.Errorf("%s: service account %q", p.Name, p.Spec.ServiceAccountName)
	}
	if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "ngc" {
		t.Errorf("%s: image pull secrets %v", p.Name, p.Spec.ImagePullSecrets)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	shm := vols["dshm"].EmptyDir
	if shm == nil || shm.Medium != corev1.StorageMediumMemory || shm.SizeLimit == nil || shm.SizeLimit.Cmp(resource.MustParse("8Gi")) != 0 {
		t.Errorf("%s: dshm %+v, want a memory emptyDir of 8Gi", p.Name, shm)
	}
	if v := vols["vol-scratch"].EmptyDir; v == nil || v.SizeLimit == nil || v.SizeLimit.String() != "20Gi" {
		t.Errorf("%s: scratch %+v", p.Name, v)
	}
	if v := vols["vol-cfg"].ConfigMap; v == nil || v.Name != "train-config" {
		t.Errorf("%s: cfg %+v", p.Name, v)
	}
	if v := vols["vol-token"].Secret; v == nil || v.SecretName != "hf-token" {
		t.Errorf("%s: token %+v", p.Name, v)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for name, want := range map[string]string{"dshm": "/dev/shm", "vol-scratch": "/scratch", "vol-cfg": "/etc/train", "vol-token": "/var/run/hf"} {
		if mounts[name] != want {
			t.Errorf("%s: %s mounted at %q, want %s", p.Name, name, mounts[name], want)
		}
	}
}

// policyBackend is a kubernetes backend with the worker's identity whose public pool
// allows host networking, host paths under /mnt/nvme and rdma/hca, and whose spot pool
// is restricted.
func policyBackend(t *testing.T) *kubebackend.Backend {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubebackend.New(cs,
		// No node of the test cluster has rdma/hca: the pool is marked autoscaled, so that
		// the fit check (placement.go) lets the pod reach the API server, which is what
		// this test is about.
		kubebackend.WithPool(schemas.PoolPublic, kubebackend.PoolConfig{Autoscaled: true, Policy: kubebackend.PodPolicy{
			AllowHostNetwork: true, HostPaths: []string{"/mnt/nvme"}, ExtendedResources: []string{"rdma/hca"},
		}}),
		kubebackend.WithPool(schemas.PoolSpot, kubebackend.PoolConfig{Policy: kubebackend.PodPolicy{Security: kubebackend.SecurityRestricted}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// policyGang is the one-replica gang of job name in ws, in pool.
func policyGang(t *testing.T, ws, name string, pool schemas.Pool, mutate func(*schemas.TrainingJob)) backend.GangSpec {
	t.Helper()
	job, err := schemas.DecodeTrainingJob([]byte(itest.JobDoc(name, ws, `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
`)))
	if err != nil {
		t.Fatal(err)
	}
	job.Default()
	job.Spec.Resources.Pool = pool
	if mutate != nil {
		mutate(job)
	}
	if errs := job.Validate(); errs != nil {
		t.Fatalf("invalid job: %v", errs)
	}
	g, err := backend.BuildGang(job, backend.GangParams{Ref: backend.GangRef{Workspace: ws, Job: name}, UID: name + "-uid"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestPodPolicyOnKubernetes launches gangs on the real API server: a pool whose policy
// allows them gets host networking, a hostPath volume and rdma/hca; the restricted
// pool's pods pass the API server's PodSecurity admission at the restricted level,
// which refuses the default (image's user) pods in the same namespace — so the check
// of the policy is the API server's, not ours.
func TestPodPolicyOnKubernetes(t *testing.T) {
	ctx := testContext(t)
	const ws = "kube-podpolicy"
	b := policyBackend(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if _, err := env.cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The image's user: refused by the namespace's restricted PodSecurity level.
	err := b.Launch(ctx, policyGang(t, ws, "asimage", schemas.PoolQuota, nil))
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Fatalf("image-user pod in a restricted namespace: %v, want PodSecurity's refusal as an invalid spec", err)
	}
	t.Logf("PodSecurity refused the image-user pod: %.200s", err)
	if err := b.Launch(ctx, policyGang(t, ws, "restricted", schemas.PoolSpot, nil)); err != nil {
		t.Fatalf("restricted pool in a restricted namespace: %v", err)
	}
	p, err := env.cluster.Client.CoreV1().Pods(ws).Get(ctx, "restricted-worker-0-a0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("restricted pod security context %+v", sc)
	}

	// Host access and extended resources, in a namespace without PodSecurity.
	const hostWS = "kube-podpolicy-host"
	host := func(j *schemas.TrainingJob) {
		j.Spec.Pod = &schemas.PodOptions{HostNetwork: true, Volumes: []schemas.Volume{
			{Name: "nvme", MountPath: "/nvme", HostPath: &schemas.HostPathVolume{Path: "/mnt/nvme/cache"}},
		}}
		r := j.Spec.Roles["worker"]
		r.Resources.Extended = map[string]resource.Quantity{"rdma/hca": resource.MustParse("1")}
		j.Spec.Roles["worker"] = r
	}
	err = b.Launch(ctx, policyGang(t, hostWS, "denied", schemas.PoolQuota, host))
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "spec.pod.hostNetwork") {
		t.Errorf("quota pool: %v, want an invalid spec naming spec.pod.hostNetwork", err)
	}
	if err := b.Launch(ctx, policyGang(t, hostWS, "host", schemas.PoolPublic, host)); err != nil {
		t.Fatalf("public pool: %v", err)
	}
	p, err = env.cluster.Client.CoreV1().Pods(hostWS).Get(ctx, "host-worker-0-a0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Spec.HostNetwork || p.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %s", p.Spec.HostNetwork, p.Spec.DNSPolicy)
	}
	var hostPath string
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			hostPath = v.HostPath.Path
		}
	}
	if hostPath != "/mnt/nvme/cache" {
		t.Errorf("hostPath %q", hostPath)
	}
	if q := p.Spec.Containers[0].Resources.Limits["rdma/hca"]; q.Value() != 1 {
		t.Errorf("rdma/hca limit %s", q.String())
	}
	if l, _ := env.cluster.Client.CoreV1().Pods(hostWS).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/job=denied"}); len(l.Items) != 0 {
		t.Errorf("the refused gang created %d pods", len(l.Items))
	}
	for _, ref := range []backend.GangRef{{Workspace: ws, Job: "asimage"}, {Workspace: ws, Job: "restricted"}, {Workspace: hostWS, Job: "host"}} {
		if err := b.Cleanup(ctx, ref); err != nil {
			t.Errorf("cleanup %v: %v", ref, err)
		}
	}
}

// TestWorkerInClusterConfig runs `dlc worker --kubeconfig in-cluster` as a pod would:
// the worker's service account token and the cluster CA in a directory
// (DLC_KUBE_SERVICE_ACCOUNT_DIR, the injectable stand-in for
// /var/run/secrets/kubernetes.io/serviceaccount) and KUBERNETES_SERVICE_HOST/PORT
// pointing at the test API server, and no kubeconfig anywhere. A job then runs on pods,
// shaped by the worker's --pool-security and --shm-size flags.
func TestWorkerInClusterConfig(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	if env.workerCfg.BearerToken == "" {
		t.Fatal("the worker's REST config has no bearer token")
	}
	ca, err := os.ReadFile(env.cluster.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(env.workerCfg.BearerToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.cluster.Server)
	if err != nil {
		t.Fatal(err)
	}

	workerEnv := append(withoutKubeconfig(itest.WorkerEnv(env.stack)),
		"KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port(), "HOME="+dir)
	// The worker's pod flags too: the quota pool restricted, a 2Gi /dev/shm.
	args := itest.WorkerArgs(env.stack, "--kubeconfig", "in-cluster", "--health-probe-annotation", "kwok.opendlc.io/complete-after=1s",
		"--pool-security", "quota=restricted", "--shm-size", "2Gi")

	// The directory is where the configuration comes from: an empty one stops the
	// worker at once.
	bad := exec.CommandContext(ctx, env.dlcBin, args...)
	bad.Env = append(workerEnv, kubebackend.EnvServiceAccountDir+"="+t.TempDir())
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "service account token") {
		t.Fatalf("worker without a token: %v\n%s", err, out)
	}

	// Replace the kubeconfig worker with an in-cluster one; put it back afterwards.
	stopWorker()
	t.Cleanup(func() {
		stopWorker()
		if err := startWorker(); err != nil {
			t.Errorf("restart the kubeconfig worker: %v", err)
		}
	})
	cmd := exec.Command(env.dlcBin, args...)
	cmd.Env = append(workerEnv, kubebackend.EnvServiceAccountDir+"="+dir)
	logf, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	env.worker = cmd

	const ws, name = "kube-incluster", "incluster"
	submit(t, ctx, kwokJob(name, ws, "2s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2}}
  logs: {forward: false}
`))
	var pods []corev1.Pod
	testutil.Eventually(t, itest.Left(ctx), "the in-cluster worker's pods", func() bool { pods = jobPods(t, ctx, ws, name); return len(pods) == 2 }, itest.PollInterval)
	for _, p := range pods {
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: security context %+v, want the restricted pool's", p.Name, sc)
		}
		var shm *resource.Quantity
		for _, v := range p.Spec.Volumes {
			if v.Name == "dshm" && v.EmptyDir != nil {
				shm = v.EmptyDir.SizeLimit
			}
		}
		if shm == nil || shm.String() != "2Gi" {
			t.Errorf("%s: /dev/shm size %v, want 2Gi", p.Name, shm)
		}
	}
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		log, _ := os.ReadFile(filepath.Join(dir, "worker.log"))
		t.Fatalf("%s: %s\nworker log:\n%s", j.Status.Phase, j.Status.Message, log)
	}
}

// withoutKubeconfig drops KUBECONFIG from an environment, so only the in-cluster
// configuration can reach the cluster.
func withoutKubeconfig(env []string) []string {
	out := env[:0:0]
	for _, v := range env {
		if !strings.HasPrefix(v, "KUBECONFIG=") {
			out = append(out, v)
		}
	}
	return out
}
