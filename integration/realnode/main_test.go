// Package realnode runs OpenDLC's jobs in real containers: a Kubernetes control plane
// (kubestack) with two real nodes, each a kubelet with its own containerd and runc, pods
// on a bridge network that exists only on this machine, CoreDNS for the cluster domain,
// and the training image (package images: Debian with PyTorch, XGBoost, Open MPI and the
// project's Python library and examples) imported into both nodes. The Temporal dev
// server, NATS JetStream and S3 run as in the other integration packages, and a `dlc
// worker --kubeconfig` process acts as the service account of deploy/rbac.yaml (and
// deploy/rbac-node-stats.yaml, for its resource samples). Pods
// reach the stack's S3 through kubestack.ExposeToPods (the machine's address on the pod
// bridge).
//
// The tests that take a node, the registry or the worker away, and those whose pods ask
// for more than half a CPU each or for most of the nodes, run one at a time. The others
// run in parallel, after them, each admitted by reserve (capacity_test.go) only once
// all its pods fit beside those of the tests already running. Without a gang scheduler,
// gangs that together ask for more than the nodes' four CPUs can each get some of their
// pods placed and none all of them: seen here with three framework jobs at once, all
// stuck in Launching until their placement timeout.
//
// Needs root, like kubestack's real nodes. The training image's first build takes
// several minutes (mmdebstrap); it is cached by the hash of its inputs.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/kubestack"
)

var env struct {
	cluster   *kubestack.Cluster
	stack     *embedded.Embedded
	api       *dlc.Client
	training  images.TrainingImages
	dlcBin    string
	dir       string
	worker    *exec.Cmd
	podS3     string // the S3 endpoint pods use, http://HostIP:port
	workerKub string
	capacity  *capacity // the parallel tests' admission to the nodes (capacity_test.go)
}

// parallelTests is how many of the parallel tests may run at once unless -parallel says:
// reserve, not their number, bounds what they put on the nodes, and most of a test's
// time is waiting on containers.
const parallelTests = 8

func TestMain(m *testing.M) {
	itest.DefaultParallel(parallelTests)
	os.Exit(itest.Main(m, "realnode", 40*time.Minute, func(ctx context.Context, dir string) (func(), error) {
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
	built := make(chan error, 1)
	go func() { built <- itest.Build(ctx, "./cmd/dlc", env.dlcBin) }()
	// The stack (Temporal, NATS, S3) starts while the cluster does: neither needs the
	// other until the worker and ExposeToPods.
	stackStarted := make(chan error, 1)
	go func() {
		var err error
		env.stack, err = embedded.Start(ctx, embedded.Config{
			Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", NoWorker: true, Logger: itest.Logger(slog.LevelError),
		})
		stackStarted <- err
	}()
	err := func() error {
		var err error
		// The training image is built (or read from the cache) before the nodes start:
		// each node's containerd imports it before its kubelet registers.
		if env.training, err = images.Training(ctx); err != nil {
			return err
		}
		start := time.Now()
		env.cluster, err = kubestack.Start(ctx, kubestack.Options{
			Dir: filepath.Join(dir, "cluster"), Nodes: -1, RealNodes: 2,
			Images: []string{env.training.Root.Tarball},
		})
		if err != nil {
			return err
		}
		// What a cluster start costs is worth seeing in CI's log.
		fmt.Fprintf(os.Stderr, "realnode: cluster with 2 real nodes ready in %s (%s)\n",
			time.Since(start).Round(100*time.Millisecond), strings.Join(env.cluster.ImageStores(), "; "))
		// The worker's RBAC, and the node statistics its resource samples read.
		for _, m := range []string{"rbac.yaml", "rbac-node-stats.yaml"} {
			if err := kubestack.ApplyManifest(ctx, env.cluster.Client, filepath.Join(itest.Root(), "deploy", m)); err != nil {
				return err
			}
		}
		if env.capacity, err = newCapacity(ctx); err != nil {
			return err
		}
		env.workerKub, _, err = env.cluster.ServiceAccountKubeconfig(ctx, "opendlc-system", "opendlc-worker", time.Hour)
		return err
	}()
	// Wait for the stack either way: teardown closes what started.
	if err := errors.Join(err, <-stackStarted); err != nil {
		return err
	}
	if env.api, err = itest.Client(env.stack); err != nil {
		return err
	}
	s3URL, err := url.Parse(env.stack.Stack.S3.Endpoint)
	if err != nil {
		return err
	}
	podS3, err := env.cluster.ExposeToPods(s3URL.Host)
	if err != nil {
		return err
	}
	env.podS3 = "http://" + podS3
	if err := <-built; err != nil {
		return err
	}
	return startWorker()
}

// startWorker runs `dlc worker --kubeconfig` as the opendlc-worker service account, with
// the pods' S3 endpoint on the pod bridge.
func startWorker() error {
	var err error
	env.worker, err = itest.StartWorker(env.dlcBin, env.stack, filepath.Join(env.dir, "worker.log"),
		"--kubeconfig", env.workerKub, "--pod-s3-endpoint", env.podS3, "--image-pull-grace", testImagePullGrace.String(),
		"--node-lost-grace", "5s",
		// Resource samples from the kubelets, every 2 s (TestResourceSamplesFromTheKubelet).
		"--node-stats", "--resource-interval", "2s",
		// The node health check pods run the training image (it has sh and df): nothing
		// can be pulled from outside the machine.
		"--health-probe-image", env.training.Root.Ref)
	return err
}

// stopWorker SIGKILLs the worker.
func stopWorker() {
	if env.worker != nil && env.worker.ProcessState == nil {
		_ = env.worker.Process.Signal(syscall.SIGKILL)
		_ = env.worker.Wait()
	}
}

// job is the YAML of a TrainingJob named name in workspace ws on the training image,
// whose spec continues with spec (YAML lines indented by two spaces).
func job(name, ws, spec string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  image: %s
`, name, ws, env.training.Root.Ref) + spec
}

func submit(t *testing.T, ctx context.Context, spec string) {
	t.Helper()
	itest.Submit(t, ctx, env.api, spec)
}

// mustSucceed waits for a job to end and fails the test, with its logs, unless it
// succeeded.
func mustSucceed(t *testing.T, ctx context.Context, ws, name string) *api.Job {
	t.Helper()
	j := itest.WaitJob(t, ctx, env.api, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != "Succeeded" {
		for _, r := range jobLogs(t, ctx, ws, name) {
			t.Logf("[%s a%d] %s", r.Replica, r.Attempt, r.Line)
		}
		t.Fatalf("job %s: phase %s (%s: %s), want Succeeded", name, j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	return j
}

func jobLogs(t *testing.T, ctx context.Context, ws, name string) []events.LogRecord {
	t.Helper()
	return itest.JobLogs(t, ctx, env.api, ws, name)
}

// jobPods lists the pods of a job (in its workspace's namespace).
func jobPods(t *testing.T, ctx context.Context, ws, name string) []corev1.Pod {
	t.Helper()
	l, err := env.cluster.Client.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/job=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}
