package realnode

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// testImagePullGrace is the worker's --image-pull-grace here (startWorker): how long a
// pull may keep failing before the job fails as ImagePull.
// The kubelet retries a failed pull after 10 s, then 20 s: long enough for one retry
// after a short registry outage.
const testImagePullGrace = 45 * time.Second

// The private registry, started once for the tests that pull from it, with the busybox
// image pushed into it.
var registry struct {
	once sync.Once
	r    *kubestack.Registry
	ref  string // the busybox image in the registry
	err  error
}

func privateRegistry(t *testing.T) (*kubestack.Registry, string) {
	t.Helper()
	registry.once.Do(func() {
		ctx := itest.Context(t, 5*time.Minute)
		img, err := images.Busybox(ctx)
		if err != nil {
			registry.err = err
			return
		}
		if registry.r, registry.err = env.cluster.StartRegistry(ctx); registry.err != nil {
			return
		}
		registry.ref, registry.err = registry.r.Push(ctx, img, "team/busybox", "1")
	})
	if registry.err != nil {
		t.Fatal(registry.err)
	}
	return registry.r, registry.ref
}

// shellJob is a one-replica custom job of image that runs command in sh, with spec lines
// extra (indented by two spaces) appended.
func shellJob(name, ws, image, command, extra string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: custom
  image: %s
  command: [sh, -c, %q]
  roles:
    worker: {replicas: 1, resources: {cpu: "100m", memory: 64Mi}}
  timeout: 3m
%s`, name, ws, image, command, extra)
}

// createPullSecret creates the registry's pull secret in the workspace's namespace.
func createPullSecret(t *testing.T, ws string, r *kubestack.Registry) {
	t.Helper()
	ctx := itest.Context(t, time.Minute)
	cs := env.cluster.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ws).Create(ctx, r.PullSecret(ws, "regcred"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An image that exists nowhere fails the job as ImagePull within the pull grace: the
// kubelet's pull really failed (ErrImagePull or ImagePullBackOff on the pod), and the
// pull never left the machine (the image's registry is sent to a closed loopback port).
func TestMissingImageFailsAsImagePull(t *testing.T) {
	t.Parallel()
	reserve(t, "100m")
	ctx := itest.Context(t, 3*time.Minute)
	const ws, name = "rn-missing", "missing"
	submit(t, ctx, shellJob(name, ws, images.Domain+"/no-such-image:1", "true", ""))
	var reason string
	testutil.Eventually(t, itest.Left(ctx), "the pod's pull failing", func() bool {
		for _, p := range jobPods(t, ctx, ws, name) {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					reason = w.Reason + ": " + w.Message
					return true
				}
			}
		}
		return false
	}, itest.PollInterval)
	t.Logf("kubelet: %s", reason)
	j := itest.WaitJob(t, ctx, env.api, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobFailed || len(j.Status.Attempts) == 0 || j.Status.Attempts[0].Class != schemas.FailureImagePull {
		t.Fatalf("phase %s attempts %+v, want Failed with class ImagePull", j.Status.Phase, j.Status.Attempts)
	}
}

// A private registry: the job that names the pull secret runs (the kubelet pulled the
// image with the secret's credentials); the same job without it fails as ImagePull,
// the registry having refused the anonymous pull.
func TestPrivateRegistryNeedsItsPullSecret(t *testing.T) {
	t.Parallel()
	reserve(t, "100m", "100m")
	r, ref := privateRegistry(t)
	ctx := itest.Context(t, 4*time.Minute)
	const ws = "rn-private"
	createPullSecret(t, ws, r)
	submit(t, ctx, shellJob("with-secret", ws, ref, "echo pulled-and-ran", "  pod: {imagePullSecrets: [regcred]}\n"))
	submit(t, ctx, shellJob("without", ws, ref, "echo should-not-run", ""))
	mustSucceed(t, ctx, ws, "with-secret")
	found := false
	for _, rec := range jobLogs(t, ctx, ws, "with-secret") {
		found = found || rec.Line == "pulled-and-ran"
	}
	if !found {
		t.Error("the job with the pull secret did not print its line")
	}
	j := itest.WaitJob(t, ctx, env.api, ws, "without", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobFailed || len(j.Status.Attempts) == 0 || j.Status.Attempts[0].Class != schemas.FailureImagePull {
		t.Fatalf("without the secret: phase %s attempts %+v, want Failed with class ImagePull", j.Status.Phase, j.Status.Attempts)
	}
	if m := j.Status.Attempts[0].Message; !strings.Contains(strings.ToLower(m), "unauthorized") && !strings.Contains(strings.ToLower(m), "authorization") {
		t.Logf("without the secret, the failure says %q", m)
	}
}

// A registry that is down when the job starts: the kubelet's pulls fail (seen on the
// pod) while the job keeps waiting within the pull grace; once the registry is back the
// pull succeeds and the job runs to the end, in its first attempt.
func TestRegistryDownThenBackWithinTheGrace(t *testing.T) {
	r, _ := privateRegistry(t)
	ctx := itest.Context(t, 4*time.Minute)
	const ws, name = "rn-down", "down"
	createPullSecret(t, ws, r)
	// A tag of its own, so that no node has it yet and the kubelet must pull.
	img, err := images.Busybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Push(ctx, img, "team/busybox", "outage")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = r.Start(itest.Context(t, time.Minute))
		}
	})
	submit(t, ctx, shellJob(name, ws, ref, "echo ran-after-outage", "  pod: {imagePullSecrets: [regcred]}\n"))
	testutil.Eventually(t, itest.Left(ctx), "the pull failing while the registry is down", func() bool {
		for _, p := range jobPods(t, ctx, ws, name) {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					return true
				}
			}
		}
		return false
	}, itest.PollInterval)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	j := mustSucceed(t, ctx, ws, name)
	if j.Status.Restarts != 0 {
		t.Errorf("the job restarted %d times; the outage was within the pull grace", j.Status.Restarts)
	}
}
