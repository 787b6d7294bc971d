package kube

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A workspace registered with its own namespace and pod defaults runs its jobs' pods in
// that namespace, as the workspace's service account, with the workspace's pull secret
// after the pool's and before the job's own.
func TestWorkspaceNamespaceAndPodDefaults(t *testing.T) {
	ctx := testContext(t)
	cs := env.cluster.Client
	const ws, ns = "kube-ws", "kube-ws-pods"
	createNamespace(t, ctx, ns)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: ws, Namespace: ns, PodDefaults: &schemas.PodDefaults{
		ServiceAccountName: "trainer", ImagePullSecrets: []string{"ws-registry"}, Security: schemas.SecurityRestricted,
	}}); err != nil {
		t.Fatal(err)
	}
	// Invalid pod defaults are refused, naming the field, and create nothing.
	_, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: "kube-ws-bad", PodDefaults: &schemas.PodDefaults{ImagePullSecrets: []string{"Not_A_Name"}}})
	if err == nil || !strings.Contains(err.Error(), "podDefaults.imagePullSecrets[0]") {
		t.Errorf("invalid pod defaults: %v, want an error naming podDefaults.imagePullSecrets[0]", err)
	}
	if _, err := env.api.GetWorkspace(ctx, "kube-ws-bad"); err == nil {
		t.Error("the refused workspace exists")
	}

	submit(t, ctx, kwokJob("placed", ws, "5s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  pod: {imagePullSecrets: [job-registry]}
  roles: {worker: {replicas: 2, resources: {gpu: 1}}}
`))
	var pods []corev1.Pod
	testutil.Eventually(t, itest.Left(ctx), "the job's pods in "+ns, func() bool {
		pods = jobPods(t, ctx, ns, "placed")
		return len(pods) == 2
	}, itest.PollInterval)
	for _, p := range pods {
		if p.Spec.ServiceAccountName != "trainer" {
			t.Errorf("pod %s runs as %q, want the workspace's trainer", p.Name, p.Spec.ServiceAccountName)
		}
		var secrets []string
		for _, s := range p.Spec.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if !slices.Equal(secrets, []string{"ws-registry", "job-registry"}) {
			t.Errorf("pod %s pull secrets %v, want [ws-registry job-registry]", p.Name, secrets)
		}
		// The workspace's restricted policy tightens the public pool's (image user).
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("pod %s security context %+v, want the workspace's restricted profile", p.Name, sc)
		}
	}
	j := waitJob(t, ctx, ws, "placed", "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	// Nothing went to the namespace the workspace's name would map to.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ws, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want not found (the workspace's pods run in %s)", ws, err, ns)
	}
}

// rbacMode is one of deploy/'s two RBAC modes, as a test applies it.
type rbacMode struct {
	name     string
	manifest string
	// account is the service account the worker runs as; namespaced mode's differs
	// from rbac.yaml's (applied by TestMain) so the two grants do not add up.
	account string
	// namespaces are the workspace namespaces the Roles are copied into
	// (namespaced mode).
	namespaces []string
	// health says whether node health checks are on: without them the node-health
	// ClusterRole (and the health namespace's Role) is left out.
	health bool
}

// The worker's identity can do what deploy/ grants in each mode and nothing more. In
// namespaced mode, applied from deploy/rbac-namespaced.yaml without the health check
// parts: a worker with exactly that RBAC runs a job in its workspace's namespace,
// watches nothing cluster-wide, refuses a job of a namespace it holds no Role in, and
// may not create a pod in kube-system or another namespace, create a namespace, or
// patch a node.
func TestWorkerHasOnlyItsRole(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		ctx := testContext(t)
		cs, err := kubernetes.NewForConfig(env.workerCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("the worker cannot list pods: %v", err)
		}
		if _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
			t.Errorf("listing secrets: %v, want forbidden", err)
		}
		// Node health checks list nodes and patch them (quarantine), and no more.
		if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("the worker cannot list nodes: %v", err)
		}
		if err := patchNode(ctx, cs); err != nil {
			t.Errorf("patching a node (health checks on): %v", err)
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, env.cluster.Nodes[0], metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
			t.Errorf("deleting a node: %v, want forbidden", err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
			t.Errorf("deleting a namespace: %v, want forbidden", err)
		}
	})

	t.Run("namespaced", func(t *testing.T) {
		ctx := itest.Context(t, 4*time.Minute)
		const ws, ns, other = "kube-nsmode", "kube-nsmode-a", "kube-nsmode-b"
		createNamespace(t, ctx, ns)
		createNamespace(t, ctx, other)
		mode := rbacMode{name: "namespaced", manifest: "../../deploy/rbac-namespaced.yaml", account: "opendlc-worker-ns",
			namespaces: []string{ns}}
		if err := applyMode(ctx, env.cluster.Client, mode); err != nil {
			t.Fatal(err)
		}
		kubeconfig, cfg, err := env.cluster.ServiceAccountKubeconfig(ctx, kube.WorkerNamespace, mode.account, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// What the RBAC allows, and what it refuses.
		if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("listing pods in %s: %v", ns, err)
		}
		if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("listing nodes: %v", err)
		}
		for _, forbidden := range []struct {
			what string
			err  error
		}{
			{"listing pods cluster-wide", listErr(cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}))},
			{"watching services cluster-wide", watchErr(ctx, cs)},
			{"creating a pod in kube-system", createPod(ctx, cs, "kube-system")},
			{"creating a pod in " + other, createPod(ctx, cs, other)},
			{"creating a namespace", createErr(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-nsmode-new"}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}))},
			{"listing secrets in " + ns, listErr(cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{Limit: 1}))},
			{"patching a node (health checks off)", patchNode(ctx, cs)},
		} {
			if !apierrors.IsForbidden(forbidden.err) {
				t.Errorf("%s: %v, want forbidden", forbidden.what, forbidden.err)
			}
		}

		// A worker with exactly this RBAC, in namespaced mode, replaces the
		// cluster-wide one for the rest of the test.
		if _, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: ws, Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(env.dir, "worker-namespaced.log")
		stopWorker()
		w, err := startWorkerProcess(kubeconfig, logPath, "--kube-namespace", ns, "--health-checks=false")
		t.Cleanup(func() {
			_ = w.Process.Kill()
			_ = w.Wait()
			if err := startWorker(); err != nil {
				t.Errorf("restarting the cluster-wide worker: %v", err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}

		submit(t, ctx, kwokJob("inside", ws, "5s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 1}}}
`))
		testutil.Eventually(t, itest.Left(ctx), "the job's pods in "+ns, func() bool { return len(jobPods(t, ctx, ns, "inside")) == 2 }, itest.PollInterval)
		j := waitJob(t, ctx, ws, "inside", "terminal", terminal)
		if j.Status.Phase != schemas.JobSucceeded {
			t.Errorf("job in %s: phase %s: %s", ns, j.Status.Phase, j.Status.Message)
		}
		// A workspace whose namespace holds no Role of the worker: refused before any
		// request, with a message naming the namespace.
		submit(t, ctx, kwokJob("outside", other, "1s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
`))
		j = waitJob(t, ctx, other, "outside", "terminal", terminal)
		if j.Status.Phase != schemas.JobFailed || !strings.Contains(j.Status.Message, "namespace "+other+" is not one of the worker's namespaces") {
			t.Errorf("job in %s: phase %s: %s, want Failed naming the namespace", other, j.Status.Phase, j.Status.Message)
		}
		// A job asking for a node health check runs without one (checks are off: the
		// check refuses to run, and the workflow launches without it): no check pod,
		// and no node patched.
		submit(t, ctx, kwokJob("checked", ws, "1s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  healthCheck: {enabled: true}
  roles: {worker: {replicas: 1}}
`))
		j = waitJob(t, ctx, ws, "checked", "terminal", terminal)
		if j.Status.Phase != schemas.JobSucceeded || len(j.Status.Health) != 0 {
			t.Errorf("job with a health check: phase %s (%s), %d node verdicts; want Succeeded without a check", j.Status.Phase, j.Status.Message, len(j.Status.Health))
		}
		checks, err := env.cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelHealthCheck})
		if err != nil || len(checks.Items) != 0 {
			t.Errorf("check pods in %s: %v, %v; want none", ns, checks, err)
		}
		// The worker never tried what its RBAC refuses (a cluster-wide informer would
		// log its forbidden list at every retry).
		logs, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(logs), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("the namespaced worker was refused something: %s", line)
			}
		}
	})
}

// startWorkerProcess runs `dlc worker` with kubeconfig and extra flags, logging to
// logPath, as startWorker does for the cluster-wide worker.
func startWorkerProcess(kubeconfig, logPath string, extra ...string) (*exec.Cmd, error) {
	args := append([]string{"--kubeconfig", kubeconfig}, extra...)
	cmd := exec.Command(env.dlcBin, itest.WorkerArgs(env.stack, args...)...)
	cmd.Env = itest.WorkerEnv(env.stack)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	return cmd, cmd.Start()
}

// applyMode applies a deploy/ manifest for the service account mode.account: the Role
// and RoleBinding of the example namespace are copied into each of mode.namespaces,
// every binding names mode.account, and without health checks the node-health
// ClusterRole and the health namespace's Role are left out. Nothing else is changed.
func applyMode(ctx context.Context, cs kubernetes.Interface, mode rbacMode) error {
	objs, err := manifestObjects(mode.manifest)
	if err != nil {
		return err
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: mode.account, Namespace: kube.WorkerNamespace}}
	for _, obj := range objs {
		var errs []error
		switch o := obj.(type) {
		case *corev1.Namespace:
			continue // opendlc-system exists
		case *corev1.ServiceAccount:
			o.Name = mode.account
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			errs = append(errs, err)
		case *rbacv1.ClusterRole:
			if o.Name == kube.WorkerNodeHealthClusterRole && !mode.health {
				continue
			}
			o.Name += "-" + mode.name
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			errs = append(errs, err)
		case *rbacv1.ClusterRoleBinding:
			if o.Name == kube.WorkerNodeHealthClusterRole && !mode.health {
				continue
			}
			o.Name += "-" + mode.name
			o.RoleRef.Name += "-" + mode.name
			o.Subjects = subjects
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			errs = append(errs, err)
		case *rbacv1.Role:
			for _, ns := range roleNamespaces(o.Namespace, mode) {
				r := o.DeepCopy()
				r.Namespace, r.Name = ns, r.Name+"-"+mode.name
				_, err = cs.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{})
				errs = append(errs, err)
			}
		case *rbacv1.RoleBinding:
			for _, ns := range roleNamespaces(o.Namespace, mode) {
				b := o.DeepCopy()
				b.Namespace, b.Name, b.RoleRef.Name, b.Subjects = ns, b.Name+"-"+mode.name, b.RoleRef.Name+"-"+mode.name, subjects
				_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{})
				errs = append(errs, err)
			}
		default:
			return errors.New(mode.manifest + ": unexpected object")
		}
		for _, err := range errs {
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

// roleNamespaces are the namespaces a Role of the manifest in namespace ns goes to: the
// health namespace's only with health checks, the example namespace's to each of the
// mode's namespaces.
func roleNamespaces(ns string, mode rbacMode) []string {
	if ns == kube.WorkerNamespace {
		if mode.health {
			return []string{ns}
		}
		return nil
	}
	return mode.namespaces
}

func listErr[T any](_ T, err error) error   { return err }
func createErr[T any](_ T, err error) error { return err }

// watchErr is the error of a cluster-wide watch of services.
func watchErr(ctx context.Context, cs kubernetes.Interface) error {
	w, err := cs.CoreV1().Services("").Watch(ctx, metav1.ListOptions{})
	if err == nil {
		w.Stop()
	}
	return err
}

// createPod tries to create a pod in ns (a dry run: nothing is stored).
func createPod(ctx context.Context, cs kubernetes.Interface, ns string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.local/probe:1"}}},
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// patchNode tries a health check's patch of a node (a dry run).
func patchNode(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Nodes().Patch(ctx, env.cluster.Nodes[0], types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"opendlc.io/rbac-probe":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
