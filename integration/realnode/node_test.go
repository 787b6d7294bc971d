package realnode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A real node lost: its kubelet stops and every container on it dies, as when a machine
// goes away. The controller manager marks the node NotReady or Unknown once its
// heartbeats stop, the worker fails the attempt as NodeLost, and the job's next attempt
// runs whole on the other node, to the end.
func TestRealNodeLostGangReplaced(t *testing.T) {
	ctx := itest.Context(t, 6*time.Minute)
	const ws, name = "rn-nodelost", "lost"
	submit(t, ctx, shellJob(name, ws, env.training.Root.Ref,
		`echo attempt=$DLC_ATTEMPT; if [ "$DLC_ATTEMPT" = 0 ]; then sleep 600; fi; echo done`,
		"  faultTolerance: {maxRestarts: 1}\n"))
	itest.WaitJob(t, ctx, env.api, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	pods := jobPods(t, ctx, ws, name)
	if len(pods) != 1 || pods[0].Spec.NodeName == "" {
		t.Fatalf("pods %d, want 1 bound to a node", len(pods))
	}
	bad := pods[0].Spec.NodeName
	if err := env.cluster.StopKubelet(ctx, bad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.cluster.StartKubelet(ctx, bad); err != nil {
			t.Errorf("node %s never came back: %v", bad, err)
		}
	})
	// The fault happened: the node lifecycle controller, not the test, marked it.
	testutil.Eventually(t, itest.Left(ctx), "node "+bad+" not Ready", func() bool {
		n, err := env.cluster.Client.CoreV1().Nodes().Get(ctx, bad, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status != corev1.ConditionTrue
			}
		}
		return false
	}, itest.PollInterval)
	j := mustSucceed(t, ctx, ws, name)
	st := j.Status
	if st.Restarts != 1 || len(st.Attempts) != 2 || st.Attempts[0].Class != schemas.FailureNodeLost {
		t.Fatalf("restarts %d attempts %+v, want attempt 0 failed as NodeLost and one restart", st.Restarts, st.Attempts)
	}
	for _, p := range jobPods(t, ctx, ws, name) {
		if p.Labels["opendlc.io/attempt"] == "1" && p.Spec.NodeName == bad {
			t.Errorf("attempt 1's pod %s ran on the lost node %s", p.Name, bad)
		}
	}
	found := false
	for _, r := range jobLogs(t, ctx, ws, name) {
		found = found || (r.Attempt == 1 && r.Line == "done")
	}
	if !found {
		t.Error("attempt 1 did not print done")
	}
}
