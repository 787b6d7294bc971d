package realnode

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubebackend "github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// The pre-flight node health check on real nodes: the worker's check pod (the
// training image, kube.DefaultHealthProbeCommand: on a node without GPUs it checks that
// the root file system answers, `df -h /`) really runs in a container on each real
// node (the kubelet reports a containerd container that exited 0), both nodes are
// found healthy, and the job then runs.
func TestHealthProbeRunsOnTheRealNodes(t *testing.T) {
	t.Parallel()
	// The check pods ask for nothing.
	reserve(t, "100m")
	ctx := itest.Context(t, 5*time.Minute)
	const ws, name = "rn-health", "checked"
	// Watch the check pods: what the kubelet says of their containers before the
	// worker deletes them.
	var mu sync.Mutex
	ran := map[string]corev1.ContainerStateTerminated{} // node → the check container's end
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for watchCtx.Err() == nil {
			l, err := env.cluster.Client.CoreV1().Pods(ws).List(watchCtx, metav1.ListOptions{LabelSelector: kubebackend.LabelHealthCheck})
			if err == nil {
				for _, p := range l.Items {
					for _, cs := range p.Status.ContainerStatuses {
						if term := cs.State.Terminated; term != nil {
							mu.Lock()
							ran[p.Spec.NodeName] = *term
							mu.Unlock()
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	submit(t, ctx, shellJob(name, ws, env.training.Root.Ref, "echo after-the-check",
		"  healthCheck: {enabled: true, timeout: 2m}\n"))
	j := mustSucceed(t, ctx, ws, name)
	stop()
	healthy := map[string]bool{}
	for _, h := range j.Status.Health {
		healthy[h.Node] = h.Healthy
	}
	c := j.Status.Condition(schemas.ConditionHealthChecked)
	if c == nil || len(healthy) != 2 || !healthy[env.cluster.RealNodes[0]] || !healthy[env.cluster.RealNodes[1]] {
		t.Fatalf("health %+v, condition %+v: want both real nodes checked healthy", j.Status.Health, c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, node := range env.cluster.RealNodes {
		term, ok := ran[node]
		if !ok {
			t.Errorf("no check container seen ending on %s (seen: %v)", node, ran)
			continue
		}
		if term.ExitCode != 0 || !strings.HasPrefix(term.ContainerID, "containerd://") {
			t.Errorf("check on %s: exit code %d, container %q; want 0 in a containerd container", node, term.ExitCode, term.ContainerID)
		}
	}
}
