package kubestack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/internal/tools"
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
	// Nothing of this cluster is left: no process, mount or record naming its directory.
	if pids := pidsMentioning(nodesDir); len(pids) > 0 {
		t.Errorf("processes left after Close: %v", pids)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), nodesDir) {
		t.Errorf("mounts under %s left after Close", nodesDir)
	}
	record := filepath.Join(realNodeLockDir, "dir")
	if rec, err := os.ReadFile(record); err == nil && strings.Contains(string(rec), nodesDir) {
		t.Errorf("the running cluster's record %s still names this cluster after Close: %q", record, rec)
	}
	// The machine-wide names (the bridge, the nodes' cgroups, the record) are another
	// package's as soon as Close has released the real nodes' lock and its cluster takes
	// it: they are checked with the lock held, when it comes within a minute.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	unlock, err := tools.Lock(lctx, filepath.Join(realNodeLockDir, "lock"))
	cancel()
	if err != nil {
		t.Logf("another cluster with real nodes holds the machine's lock; its bridge and cgroups are not checked here: %v", err)
		return
	}
	defer unlock()
	if err := exec.Command("ip", "link", "show", RealBridge).Run(); err == nil {
		t.Errorf("bridge %s left after Close", RealBridge)
	}
	if dirs := nodeCgroupDirs(); len(dirs) > 0 {
		t.Errorf("cgroups left after Close: %v", dirs)
	}
	if _, err := os.Stat(record); err == nil {
		t.Errorf("the running cluster's record %s left after Close", record)
	}
}

// TestRealNodeStoreKeptAcrossClusters: a real node's containerd keeps its images
// between clusters, and only as long as that is safe. A new store imports everything;
// a store its cluster closed cleanly is kept, its images not imported again, a pod runs
// from them, and an image pulled by the last cluster is gone; an image whose tarball
// changed (same reference, another configuration) is imported again; a store whose
// cluster crashed (its components SIGKILLed, its pods' shims and containers left
// running, the lock released and the record left, as when the test process dies) is
// not trusted: the next Start cleans up after the crash, removes the store and imports
// everything.
func TestRealNodeStoreKeptAcrossClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	store := t.TempDir()
	t.Setenv(EnvRealNodeStore, store)
	pause, err := images.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ref = images.Domain + "/store-test:1"
	tarA, digestA := imageVariant(t, pause, ref, "A")
	tarB, digestB := imageVariant(t, pause, ref, "B")
	if digestA == digestB {
		t.Fatal("the two variants have one configuration")
	}
	start := func(tarball string) *Cluster {
		t.Helper()
		// Not t.TempDir: containerd's socket path must stay under 104 bytes.
		dir, err := os.MkdirTemp("", "ks-store-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		c, err := Start(ctx, Options{Dir: dir, Nodes: -1, RealNodes: 1, Images: []string{tarball}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	clean := filepath.Join(store, RealNodePrefix+"0", storeClean)

	// A new store: the sandbox image's tarball and the test's are imported.
	c1 := start(tarA)
	n := c1.realNodes[0]
	if n.storeKept || n.imported != 2 {
		c1.Close()
		t.Fatalf("first cluster: store kept %t, %d tarballs imported; want a new store and 2", n.storeKept, n.imported)
	}
	// What a pull from a registry leaves in the store.
	if _, err := n.ctr(ctx, "images", "tag", ref, "127.0.0.1:5000/pulled:1"); err != nil {
		c1.Close()
		t.Fatal(err)
	}
	runStorePod(t, ctx, c1, ref, "a")
	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(clean); err != nil {
		t.Fatalf("the store is not marked clean after Close: %v", err)
	}

	// Kept: only the changed image is imported, the pulled one is gone, pods run.
	c2 := start(tarB)
	n = c2.realNodes[0]
	if !n.storeKept || n.imported != 1 {
		c2.Close()
		t.Fatalf("second cluster: store kept %t, %d tarballs imported; want kept and 1 (the changed image)", n.storeKept, n.imported)
	}
	if _, err := os.Stat(clean); err == nil {
		c2.Close()
		t.Fatal("the store is still marked clean while a cluster uses it")
	}
	listed, err := n.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		c2.Close()
		t.Fatal(err)
	}
	if strings.Contains(listed, "pulled") {
		t.Errorf("the last cluster's pulled image is still in the store:\n%s", listed)
	}
	if current, err := n.imagesCurrent(ctx, map[string]string{ref: digestB}); err != nil || !current {
		t.Errorf("%s in the store is not the changed image (%s): %v", ref, digestB, err)
	}
	runStorePod(t, ctx, c2, ref, "b")

	// A crash: what the kernel and the lock do when the test process dies.
	crashDir := c2.realNodesDir()
	record, err := os.ReadFile(filepath.Join(realNodeLockDir, "dir"))
	if err != nil {
		t.Fatal(err)
	}
	c2.mu.Lock()
	procs := c2.procs
	c2.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(p.Pid(), syscall.SIGKILL) // Pdeathsig
	}
	// The lock's file closes with the process; the record of the cluster stays.
	c2.unlockRealNodes()
	if err := os.WriteFile(filepath.Join(realNodeLockDir, "dir"), record, 0o600); err != nil {
		t.Fatal(err)
	}
	if pids := pidsMentioning(crashDir); len(pids) == 0 {
		t.Fatal("the crashed cluster left no shim or container running: the crash was not like one")
	}

	c3 := start(tarB)
	n = c3.realNodes[0]
	if n.storeKept || n.imported != 2 {
		c3.Close()
		t.Fatalf("after a crash: store kept %t, %d tarballs imported; want a new store and 2", n.storeKept, n.imported)
	}
	if pids := pidsMentioning(crashDir); len(pids) > 0 {
		t.Errorf("the crashed cluster's processes are still running: %v", pids)
	}
	runStorePod(t, ctx, c3, ref, "c")
	if err := c3.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(clean); err != nil {
		t.Errorf("the store is not marked clean after Close: %v", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), store) {
		t.Errorf("mounts under the store %s left after Close", store)
	}
}

// imageVariant writes the pause image with the environment variable VARIANT=v as a
// docker-archive tagged ref, and returns its path and its configuration's digest.
func imageVariant(t *testing.T, base images.Image, ref, v string) (string, string) {
	t.Helper()
	img, err := tarball.ImageFromPath(base.Tarball, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = append(cf.Config.Env, "VARIANT="+v)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "variant-"+v+".tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return path, digest.String()
}

// runStorePod runs a pod of image (never pulled) on the cluster's first real node and
// waits until it runs.
func runStorePod(t *testing.T, ctx context.Context, c *Cluster, image, name string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   c.RealNodes[0],
			Containers: []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullNever}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, name+" Running", func() error {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
}
