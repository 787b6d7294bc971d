package kube

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// submitFailingCheck submits recoveryJob ws/name with its pre-flight health check on
// and fails the check pod on node (kwok fails it, as a crashing nvidia-smi would) as
// soon as it appears; the node is released from quarantine when the test ends.
func submitFailingCheck(t *testing.T, ctx context.Context, ws, name, node string) {
	t.Helper()
	t.Cleanup(func() { unquarantine(t, node) })
	injected := failCheckOn(ctx, ws, node)
	submit(t, ctx, strings.Replace(recoveryJob(ws, name, "3s", ""), "logs: {forward: false}", "logs: {forward: false}\n  healthCheck: {enabled: true, timeout: 30s}", 1))
	if err := <-injected; err != nil {
		t.Fatal(err)
	}
}

// failCheckOn fails the pre-flight check pod of a job on node as soon as it appears.
func failCheckOn(ctx context.Context, ws, node string) <-chan error {
	injected := make(chan error, 1)
	go func() {
		for {
			l, err := env.cluster.Client.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{
				LabelSelector: kubebackend.LabelHealthCheck + "=job," + kubebackend.LabelNode + "=" + node,
			})
			if err == nil && len(l.Items) > 0 {
				injected <- env.cluster.FailPod(ctx, ws, l.Items[0].Name, 3)
				return
			}
			select {
			case <-ctx.Done():
				injected <- ctx.Err()
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return injected
}

// apiStatus is the HTTP status of an SDK error (0 for none or another error).
func apiStatus(err error) int {
	if ae, ok := errors.AsType[*dlc.Error](err); ok {
		return ae.Status
	}
	return 0
}

// nodeOf finds a node in a list.
func nodeOf(l *api.NodeList, name string) *api.Node {
	for i := range l.Items {
		if l.Items[i].Name == name {
			return &l.Items[i]
		}
	}
	return nil
}

// /v1/nodes on the real control plane: a job's pre-flight check quarantines a node
// (its check pod fails); the API lists it quarantined with the failed check; a
// workspace admin's token may neither read nodes nor release one (403, the node stays
// tainted); the cluster admin's release clears the quarantine (taint, label,
// annotations), the list says Healthy, a pod that may only go to that node is
// scheduled there again, and a second release is 409.
func TestNodesAPIListsAndReleasesQuarantinedNode(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-nodes-api", "checked"
	bad := env.cluster.Nodes[1]
	submitFailingCheck(t, ctx, ws, name, bad)
	testutil.Eventually(t, itest.Left(ctx), "the node tainted", func() bool {
		tainted, labelled, _ := quarantineOf(t, ctx, bad)
		return tainted && labelled
	}, itest.PollInterval)

	var n *api.Node
	testutil.Eventually(t, itest.Left(ctx), "the API listing the node quarantined", func() bool {
		l, err := env.api.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n = nodeOf(l, bad)
		return n != nil && n.Quarantined
	}, itest.PollInterval)
	if n.Status != "Quarantined" || n.Job != name || len(n.Checks) == 0 {
		t.Errorf("listed %+v, want Quarantined by job %s with its checks", n, name)
	}
	failed := false
	for _, c := range n.Checks {
		failed = failed || (!c.OK && c.Name == "Probe")
	}
	if !failed {
		t.Errorf("checks %+v, want the failed Probe", n.Checks)
	}
	if g, err := env.api.GetNode(ctx, bad); err != nil || !g.Quarantined {
		t.Errorf("get node: %+v, %v", g, err)
	}

	// A workspace admin of a workspace: 403 for reading and releasing; nothing changes.
	ensure := func() {
		if _, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: ws}); err != nil && apiStatus(err) != http.StatusConflict {
			t.Fatal(err)
		}
	}
	ensure()
	tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: "nodes-wsadmin", Workspace: ws, Role: api.RoleWorkspaceAdmin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), "nodes-wsadmin") })
	wsAdmin, err := dlc.New(env.stack.APIURL, dlc.WithToken(tok.Secret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wsAdmin.ReleaseNode(ctx, bad, "not mine to release"); apiStatus(err) != http.StatusForbidden {
		t.Errorf("workspace admin's release: %v, want 403", err)
	}
	if _, err := wsAdmin.ListNodes(ctx); apiStatus(err) != http.StatusForbidden {
		t.Errorf("workspace admin's list: %v, want 403", err)
	}
	if tainted, labelled, _ := quarantineOf(t, ctx, bad); !tainted || !labelled {
		t.Fatalf("node %s after the refused release: tainted %v labelled %v, want still quarantined", bad, tainted, labelled)
	}

	// The cluster admin releases it.
	rel, err := env.api.ReleaseNode(ctx, bad, "replaced the GPU")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Status != "Healthy" || rel.Quarantined {
		t.Errorf("release answered %+v", rel)
	}
	tainted, labelled, ann := quarantineOf(t, ctx, bad)
	if tainted || labelled || len(ann) != 0 {
		t.Errorf("node %s after the release: tainted %v labelled %v annotations %v", bad, tainted, labelled, ann)
	}
	testutil.Eventually(t, itest.Left(ctx), "the API listing the node healthy", func() bool {
		l, err := env.api.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n = nodeOf(l, bad)
		return n != nil && !n.Quarantined && n.Status == "Healthy"
	}, itest.PollInterval)
	if len(n.Checks) == 0 || !strings.Contains(n.Checks[0].Message, "replaced the GPU") {
		t.Errorf("release verdict %+v, want the admin's reason", n)
	}
	// Schedulable again: a pod that may only run there is scheduled there.
	cs := env.cluster.Client
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after-release"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, NodeSelector: map[string]string{"kubernetes.io/hostname": bad},
			Containers: []corev1.Container{{Name: "main", Image: "registry.local/probe:1"}},
		},
	}
	if _, err := cs.CoreV1().Pods(ws).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ws).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	testutil.Eventually(t, itest.Left(ctx), "a pod scheduled on the released node", func() bool {
		p, err := cs.CoreV1().Pods(ws).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == bad
	}, itest.PollInterval)
	if _, err := env.api.ReleaseNode(ctx, bad, ""); apiStatus(err) != http.StatusConflict {
		t.Errorf("second release: %v, want 409 (not quarantined)", err)
	}
	if j := waitJob(t, ctx, ws, name, "terminal", terminal); j.Status.Phase != schemas.JobSucceeded {
		t.Errorf("the checked job: %s: %s", j.Status.Phase, j.Status.Message)
	}
}
