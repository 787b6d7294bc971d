package kubestack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/internal/testutil"
)

// TestRealNodesRunContainers starts a cluster of two real nodes and no fake ones, runs
// a pod on each (the sandbox image's program as the container), checks that each got
// an address from its node's slice of the pod subnet and that containerd really runs
// its container, that the cluster DNS answers a headless Service's pod records and
// nothing outside the cluster, and that Close leaves nothing on the machine: no
// process, mount, cgroup or bridge.
func TestRealNodesRunContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := Start(ctx, Options{Dir: dir, Nodes: -1, RealNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	if len(c.Nodes) != 0 || len(c.RealNodes) != 2 {
		t.Fatalf("fake nodes %v, real nodes %v; want none and 2", c.Nodes, c.RealNodes)
	}
	pause, err := images.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "gang"},
			PublishNotReadyAddresses: true,
		},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, node := range c.RealNodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns, Labels: map[string]string{"app": "gang"}},
			Spec: corev1.PodSpec{
				NodeName: node, Hostname: fmt.Sprintf("worker-%d", i), Subdomain: "gang",
				Containers: []corev1.Container{{Name: "main", Image: pause.Ref, ImagePullPolicy: corev1.PullNever}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	for i := range c.RealNodes {
		name := fmt.Sprintf("p%d", i)
		testutil.Eventually(t, 2*time.Minute, name+" Running", func() error {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			ips[name] = p.Status.PodIP
			return nil
		})
		start, _ := podRange(i)
		if prefix := start[:strings.LastIndex(start, ".")+1]; !strings.HasPrefix(ips[name], prefix) {
			t.Errorf("%s has address %q, want one in %s0/24", name, ips[name], prefix)
		}
		// containerd itself lists the container as running.
		out, err := exec.CommandContext(ctx, "ctr", "--address", c.realNodes[i].sock, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
		if err != nil {
			t.Fatalf("ctr tasks ls: %v: %s", err, out)
		}
		if running := strings.Count(string(out), "RUNNING"); running < 2 { // the sandbox and the container
			t.Errorf("node %s: %d running tasks, want the pod's sandbox and container:\n%s", c.RealNodes[i], running, out)
		}
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(HostIP, "53"))
	}}
	for i := range c.RealNodes {
		host := fmt.Sprintf("worker-%d.gang.%s.svc.%s", i, ns, ClusterDomain)
		testutil.Eventually(t, 30*time.Second, "DNS "+host, func() error {
			addrs, err := resolver.LookupHost(ctx, host)
			if err != nil {
				return err
			}
			if len(addrs) != 1 || addrs[0] != ips[fmt.Sprintf("p%d", i)] {
				return fmt.Errorf("%s resolves to %v, want %s", host, addrs, ips[fmt.Sprintf("p%d", i)])
			}
			return nil
		})
	}
	if addrs, err := resolver.LookupHost(ctx, "example.org"); err == nil {
		t.Errorf("the cluster DNS answered a name outside the cluster: %v", addrs)
	}

	nodesDir := c.realNodesDir()
	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := exec.Command("ip", "link", "show", RealBridge).Run(); err == nil {
		t.Errorf("bridge %s left after Close", RealBridge)
	}
	if pids := pidsMentioning(nodesDir); len(pids) > 0 {
		t.Errorf("processes left after Close: %v", pids)
	}
	if dirs := nodeCgroupDirs(); len(dirs) > 0 {
		t.Errorf("cgroups left after Close: %v", dirs)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), nodesDir) {
		t.Errorf("mounts under %s left after Close", nodesDir)
	}
	if _, err := os.Stat(filepath.Join(realNodeLockDir, "dir")); err == nil {
		t.Errorf("the running cluster's record %s left after Close", filepath.Join(realNodeLockDir, "dir"))
	}
}
