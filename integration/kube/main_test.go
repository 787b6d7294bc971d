// Package kube tests the kubernetes backend end to end on a real control plane: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager built from Go modules, kwok
// simulating three nodes with eight GPUs each, the Temporal dev server, NATS JetStream
// and S3 — and a `dlc worker` process authenticated as the service account of
// deploy/rbac.yaml, with exactly that role.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// spotLabel marks the nodes of the spot pool in these tests.
const spotLabel = "opendlc.io/spot"

// PriorityClasses of these tests: the idle pool's, and that of urgent work that
// preempts it.
const (
	idleClass   = "opendlc-idle"
	urgentClass = "test-urgent"
)

var env struct {
	cluster    *kubestack.Cluster
	stack      *embedded.Embedded
	api        *dlc.Client
	dlcBin     string
	workerKube string       // the worker's kubeconfig: the opendlc-worker service account
	workerCfg  *rest.Config // the same identity, for checking what it may do
	worker     *exec.Cmd    // the running worker process
	dir        string
	// workerMetrics is host:port where the worker serves /metrics (scale_test.go).
	workerMetrics string
}

func TestMain(m *testing.M) {
	os.Exit(itest.Main(m, "kube", 30*time.Minute, func(ctx context.Context, dir string) (func(), error) {
		return teardown, setup(ctx, dir)
	}))
}

func teardown() {
	stopWorker()
	if env.stack != nil {
		env.stack.Close()
	}
	if env.cluster != nil {
		env.cluster.Close()
	}
}

func setup(ctx context.Context, dir string) error {
	env.dir = dir
	env.dlcBin = filepath.Join(dir, "dlc")
	// Build dlc while the control plane and the stack start: the build computes, the
	// starts mostly wait.
	built := make(chan error, 1)
	go func() { built <- itest.Build(ctx, "./cmd/dlc", env.dlcBin) }()
	var err error
	if env.cluster, err = kubestack.Start(ctx, kubestack.Options{Dir: filepath.Join(dir, "cluster")}); err != nil {
		return err
	}
	if err := applyManifest(ctx, env.cluster.Client, "../../deploy/rbac.yaml"); err != nil {
		return err
	}
	// The idle pool runs below everything else; urgent work preempts it.
	for name, value := range map[string]int32{idleClass: -100, urgentClass: 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := env.cluster.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if env.workerMetrics, err = freeAddr(); err != nil {
		return err
	}
	if env.workerKube, env.workerCfg, err = env.cluster.ServiceAccountKubeconfig(ctx, "opendlc-system", "opendlc-worker", time.Hour); err != nil {
		return err
	}
	env.stack, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", NoWorker: true, Logger: itest.Logger(slog.LevelError),
	})
	if err != nil {
		return err
	}
	if env.api, err = itest.Client(env.stack); err != nil {
		return err
	}
	if err := <-built; err != nil {
		return err
	}
	return startWorker()
}

// startWorker runs `dlc worker --kubeconfig` as the opendlc-worker service account.
func startWorker() error {
	var err error
	env.worker, err = itest.StartWorker(env.dlcBin, env.stack, filepath.Join(env.dir, "worker.log"),
		"--kubeconfig", env.workerKube,
		"--pool-selector", "spot="+spotLabel+"=true", "--pool-toleration", "spot="+spotLabel+":NoSchedule",
		"--pool-priority-class", "idle="+idleClass,
		"--pool-placement-timeout", "public="+publicPlacementTimeout,
		// kwok runs no containers: node health check pods succeed after a second.
		"--health-probe-annotation", kubestack.AnnotationCompleteAfter+"=1s",
		"--image-pull-grace", testImagePullGrace.String(), "--node-lost-grace", testNodeLostGrace.String(),
		"--metrics-addr", env.workerMetrics, "--heartbeat-budget", strconv.Itoa(testHeartbeatBudget),
		// The client-side budget of the test clients (kubestack), above the worker's
		// default of 50: every test here runs through dlc worker --kube-qps.
		"--kube-qps", "100", "--kube-burst", "200")
	return err
}

// stopWorker SIGKILLs the worker: no chance to clean anything up.
func stopWorker() {
	if env.worker != nil && env.worker.ProcessState == nil {
		_ = env.worker.Process.Signal(syscall.SIGKILL)
		_ = env.worker.Wait()
	}
}

// manifestObjects decodes every document of a multi-document YAML file.
func manifestObjects(path string) ([]runtime.Object, error) { return kubestack.ManifestObjects(path) }

// applyManifest creates every object of a multi-document YAML file.
func applyManifest(ctx context.Context, cs kubernetes.Interface, path string) error {
	return kubestack.ApplyManifest(ctx, cs, path)
}

func testContext(t *testing.T) context.Context { return itest.Context(t, 3*time.Minute) }

func submit(t *testing.T, ctx context.Context, spec string) {
	t.Helper()
	itest.Submit(t, ctx, env.api, spec)
}

// kwokJob is the YAML of a TrainingJob named name in workspace ws whose pods kwok
// completes completeAfter after they start; spec as itest.JobDoc's.
func kwokJob(name, ws, completeAfter, spec string) string {
	return kubeJob(name, ws, "kwok.opendlc.io/complete-after: "+completeAfter, spec)
}

// kubeJob is the YAML of a TrainingJob named name in workspace ws with annotations (the
// inside of a YAML flow mapping; none when empty) whose spec is spec: YAML lines
// indented by two spaces.
func kubeJob(name, ws, annotations, spec string) string {
	ann := ""
	if annotations != "" {
		ann = "\n  annotations: {" + annotations + "}"
	}
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: %s
  workspace: %s%s
spec:
`, name, ws, ann) + strings.TrimPrefix(spec, "\n")
}

// waitJob polls a job until cond holds.
func waitJob(t *testing.T, ctx context.Context, ws, name, what string, cond func(*api.Job) bool) *api.Job {
	t.Helper()
	return itest.WaitJob(t, ctx, env.api, ws, name, what, cond)
}

func terminal(j *api.Job) bool { return j.Status.Phase.Terminal() }

// jobPods lists a job's pods.
func jobPods(t *testing.T, ctx context.Context, ns, job string) []corev1.Pod {
	t.Helper()
	l, err := env.cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/job=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// createNamespace creates namespace ns and waits for its default service account, which
// pods need before they can be created.
func createNamespace(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	cs := env.cluster.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the default service account", func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, itest.PollInterval)
}

func timeline(st schemas.JobStatus) []string {
	out := make([]string, len(st.Timeline))
	for i, e := range st.Timeline {
		out[i] = string(e.Phase)
	}
	return out
}
