package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// Pull error messages as kubelets report them (waiting reason, message).
var (
	// containerd, registry unreachable: may resolve.
	pullTimeout = `rpc error: code = Unknown desc = failed to pull and unpack image "registry.local/train:1.4": ` +
		`failed to resolve reference "registry.local/train:1.4": failed to do request: Head "https://registry.local/v2/train/manifests/1.4": dial tcp 10.0.0.9:443: i/o timeout`
	// containerd, the registry answers that the tag does not exist.
	pullNotFound = `rpc error: code = NotFound desc = failed to pull and unpack image "registry.local/train:1.5": ` +
		`failed to resolve reference "registry.local/train:1.5": registry.local/train:1.5: not found`
	// the kubelet backing off repeats the last pull error.
	backOffNotFound = `Back-off pulling image "registry.local/train:1.5": ErrImagePull: ` + pullNotFound
)

func TestImageMissing(t *testing.T) {
	for msg, want := range map[string]bool{
		pullTimeout:     false,
		pullNotFound:    true,
		backOffNotFound: true,
		`Back-off pulling image "registry.local/train:1.4"`:                                                                                      false,
		`initializing source docker://quay.io/x/y:2: reading manifest 2 in quay.io/x/y: manifest unknown`:                                        true,
		`reading manifest latest in registry.local/nope: name unknown: repository name not known to registry`:                                    true,
		`failed to pull and unpack image "docker.io/library/nope:1": pull access denied, repository does not exist or may require authorization`: true,
		`failed to copy: httpReadSeeker: failed open: unexpected status code 429 Too Many Requests`:                                              false,
		`image pull failed for registry.local/train:1.4 because the registry is unavailable: connection refused`:                                 false,
	} {
		if got := imageMissing(msg); got != want {
			t.Errorf("imageMissing(%q) = %v, want %v", msg, got, want)
		}
	}
}

// pullPending puts the master of gang resnet in the given pull state on node-a.
func pullPending(t *testing.T, cs *fake.Clientset, reason, msg string) {
	t.Helper()
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{
		Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg},
		}}},
	}, "node-a")
}

// A pull that fails for a reason that may resolve keeps the replica Pending through
// the window, measured from the first failure seen, whatever the kubelet's back-off says
// in between; then it fails as ImagePull. A pull that recovers inside the window runs.
func TestImagePullGrace(t *testing.T) {
	cs := newClient()
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBackend(t, cs, WithClock(clk), WithImagePullGrace(time.Minute))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)

	pullPending(t, cs, "ErrImagePull", pullTimeout)
	testutil.Eventually(t, 10*time.Second, "the pull error seen", func() bool {
		return strings.Contains(observe(t, b, g.GangRef)[0].Message, "ErrImagePull")
	})
	master := observe(t, b, g.GangRef)[0]
	if master.Phase != schemas.ReplicaPending || !strings.Contains(master.Message, "retried until 1m0s") {
		t.Fatalf("first pull error: %s %q, want Pending within the window", master.Phase, master.Message)
	}
	clk.Step(40 * time.Second)
	pullPending(t, cs, "ImagePullBackOff", `Back-off pulling image "registry.local/train:1.4": ErrImagePull: `+pullTimeout)
	testutil.Eventually(t, 10*time.Second, "the back-off seen", func() bool {
		return strings.Contains(observe(t, b, g.GangRef)[0].Message, "ImagePullBackOff")
	})
	if m := observe(t, b, g.GangRef)[0]; m.Phase != schemas.ReplicaPending || !strings.Contains(m.Message, "failing for 40s") {
		t.Fatalf("40s into the window: %s %q", m.Phase, m.Message)
	}
	clk.Step(20 * time.Second)
	m := observe(t, b, g.GangRef)[0]
	if m.Phase != schemas.ReplicaFailed || m.Reason != schemas.FailureImagePull || !strings.Contains(m.Message, "image pull failing for 1m0s") {
		t.Fatalf("after the window: %s %s %q, want Failed ImagePull", m.Phase, m.Reason, m.Message)
	}

	// The same pod recovering before the window ends: the pull runs, the failure is
	// forgotten, and a later failure starts a new window.
	g2 := gangOf(t, ddp("bert"))
	launch(t, b, g2)
	setPodStatus(t, cs, "vision", "bert-master-0-a1", corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "RegistryUnavailable", Message: "image pull failed because the registry is unavailable"},
		}}}}, "node-a")
	testutil.Eventually(t, 10*time.Second, "bert's pull error seen", func() bool {
		return strings.Contains(observe(t, b, g2.GangRef)[0].Message, "RegistryUnavailable")
	})
	clk.Step(50 * time.Second)
	setPodStatus(t, cs, "vision", "bert-master-0-a1", runningStatus(), "node-a")
	testutil.Eventually(t, 10*time.Second, "bert running", func() bool { return observe(t, b, g2.GangRef)[0].Phase == schemas.ReplicaRunning })
	clk.Step(time.Hour)
	if m := observe(t, b, g2.GangRef)[0]; m.Phase != schemas.ReplicaRunning {
		t.Fatalf("recovered pull: %s %q", m.Phase, m.Message)
	}
}

// An image the registry says does not exist fails at once, as do the waiting reasons
// that never resolve, whatever the window.
func TestImagePullPermanentFailsFast(t *testing.T) {
	for reason, msg := range map[string]string{
		"ErrImagePull":              pullNotFound,
		"ImagePullBackOff":          backOffNotFound,
		"InvalidImageName":          `Failed to apply default image tag "Registry.local/Train": couldn't parse image name`,
		"ErrImageNeverPull":         `Container image "registry.local/train:1.4" is not present with pull policy of Never`,
		"SignatureValidationFailed": "image pull failed for registry.local/train:1.4 because the signature validation failed",
	} {
		t.Run(reason, func(t *testing.T) {
			cs := newClient()
			b := newBackend(t, cs, WithImagePullGrace(time.Hour))
			g := gangOf(t, ddp("resnet"))
			launch(t, b, g)
			pullPending(t, cs, reason, msg)
			testutil.Eventually(t, 10*time.Second, "the replica failed as ImagePull", func() bool {
				m := observe(t, b, g.GangRef)[0]
				return m.Phase == schemas.ReplicaFailed && m.Reason == schemas.FailureImagePull
			})
		})
	}
}

func TestGraceOptionsRefuseNegative(t *testing.T) {
	if _, err := New(newClient(), WithImagePullGrace(-time.Second)); err == nil || !strings.Contains(err.Error(), "image pull grace") {
		t.Errorf("negative image pull grace: %v", err)
	}
	if _, err := New(newClient(), WithNodeLostGrace(-time.Second)); err == nil || !strings.Contains(err.Error(), "node-lost grace") {
		t.Errorf("negative node-lost grace: %v", err)
	}
	b, err := New(newClient())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.transient.imagePullGrace != DefaultImagePullGrace || b.transient.nodeLostGrace != DefaultNodeLostGrace {
		t.Errorf("defaults: image pull grace %s, node-lost grace %s", b.transient.imagePullGrace, b.transient.nodeLostGrace)
	}
}

// setNodeReady sets node's Ready condition, as the kubelet or the node lifecycle
// controller would, with the given transition time.
func setNodeReady(t *testing.T, cs *fake.Clientset, name string, status corev1.ConditionStatus, reason string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if n, err = cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A node that goes Unknown keeps its replicas Running through the node-lost grace;
// back Ready within it, nothing fails; not Ready past it, they fail as NodeLost. The
// grace counts from when this worker first saw the node not Ready when the condition
// carries an older transition time (kwok's stages do).
func TestNodeLostGrace(t *testing.T) {
	cs := newClient()
	start := time.Now()
	clk := clocktesting.NewFakeClock(start)
	setNodeReady(t, cs, "node-a", corev1.ConditionTrue, "KubeletReady", start.Add(-time.Hour))
	setNodeReady(t, cs, "node-b", corev1.ConditionTrue, "KubeletReady", start.Add(-time.Hour))
	b := newBackend(t, cs, WithClock(clk), WithNodeLostGrace(30*time.Second))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	waitSynced(t, b)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", runningStatus(), "node-b")
	setPodStatus(t, cs, "vision", "resnet-worker-1-a1", runningStatus(), "node-b")
	allRunning := func() bool {
		for _, r := range observe(t, b, g.GangRef) {
			if r.Phase != schemas.ReplicaRunning {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, 10*time.Second, "every replica running", allRunning)

	// A blip: Unknown (with an old transition time), then Ready again within the grace.
	setNodeReady(t, cs, "node-b", corev1.ConditionUnknown, "NodeStatusUnknown", start.Add(-time.Hour))
	testutil.Eventually(t, 10*time.Second, "node-b seen not ready", func() bool {
		return strings.Contains(observe(t, b, g.GangRef)[1].Message, "node node-b is not ready")
	})
	clk.Step(20 * time.Second)
	if !allRunning() {
		t.Fatalf("20s into a 30s grace: %+v", observe(t, b, g.GangRef))
	}
	setNodeReady(t, cs, "node-b", corev1.ConditionTrue, "KubeletReady", clk.Now())
	testutil.Eventually(t, 10*time.Second, "node-b seen ready again", func() bool { return observe(t, b, g.GangRef)[1].Message == "" })
	clk.Step(time.Minute)
	if !allRunning() {
		t.Fatalf("node back within the grace: %+v", observe(t, b, g.GangRef))
	}

	// A real loss: the grace restarts from this transition and then runs out.
	setNodeReady(t, cs, "node-b", corev1.ConditionUnknown, "NodeStatusUnknown", clk.Now())
	testutil.Eventually(t, 10*time.Second, "node-b seen not ready", func() bool {
		return strings.Contains(observe(t, b, g.GangRef)[1].Message, "node node-b is not ready")
	})
	clk.Step(29 * time.Second)
	if !allRunning() {
		t.Fatalf("29s into the grace: %+v", observe(t, b, g.GangRef))
	}
	clk.Step(time.Second)
	reps := observe(t, b, g.GangRef)
	if reps[0].Phase != schemas.ReplicaRunning {
		t.Errorf("replica on the healthy node: %s %q", reps[0].Phase, reps[0].Message)
	}
	for _, r := range reps[1:] {
		if r.Phase != schemas.ReplicaFailed || r.Reason != schemas.FailureNodeLost || !strings.Contains(r.Message, "not ready for 30s, node-lost grace 30s") {
			t.Errorf("%s on the lost node: %s %s %q", r.Name, r.Phase, r.Reason, r.Message)
		}
	}
}

// Stop deletes the pods of a node lost past the grace with no grace at once, rather
// than waiting for a kubelet that will never confirm the kill; pods on healthy nodes
// get their grace period.
func TestStopForcesPodsOfALostNodeAtOnce(t *testing.T) {
	cs := newClient()
	now := time.Now()
	setNodeReady(t, cs, "node-a", corev1.ConditionTrue, "KubeletReady", now.Add(-time.Hour))
	setNodeReady(t, cs, "node-b", corev1.ConditionUnknown, "NodeStatusUnknown", now.Add(-time.Minute))
	b := newBackend(t, cs, WithNodeLostGrace(0), WithStopGracePeriod(10*time.Second))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	waitSynced(t, b)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", runningStatus(), "node-b")
	setPodStatus(t, cs, "vision", "resnet-worker-1-a1", runningStatus(), "node-b")
	testutil.Eventually(t, 10*time.Second, "node-b's replicas lost", func() bool {
		return observe(t, b, g.GangRef)[1].Reason == schemas.FailureNodeLost
	})
	cs.ClearActions()
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	got := deletes(cs)
	if want := []int64{10}; !slices.Equal(got["resnet-master-0-a1"], want) {
		t.Errorf("pod on the healthy node deleted with grace %v, want %v", got["resnet-master-0-a1"], want)
	}
	for _, p := range []string{"resnet-worker-0-a1", "resnet-worker-1-a1"} {
		if want := []int64{0}; !slices.Equal(got[p], want) {
			t.Errorf("pod %s on the lost node deleted with grace %v, want %v", p, got[p], want)
		}
	}
}
