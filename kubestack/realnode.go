package kubestack

// Real nodes. Beside kwok's fake nodes, Options.RealNodes starts nodes that run
// containers: per node a containerd (Debian's package, with runc) and a kubelet built
// from k8s.io/kubernetes at the control plane's version (internal/tools), plus one
// CoreDNS for the cluster. The choices, each forced by this machine or by "no traffic
// leaves the machine":
//
//   - cgroups: the machine has cgroup v1 controllers with a cgroup2 hierarchy beside
//     them (hybrid); the kubelet runs with the cgroupfs driver and failCgroupV1 off,
//     each node under its own cgroup root (/kubestack-<node>), so two kubelets on one
//     machine never touch each other's pods. runc, not crun (crun refuses hybrid mode);
//     containerd's CRI with restrict_oom_score_adj (runc cannot write oom_score_adj
//     here otherwise).
//   - network: one Linux bridge, RealBridge, in the machine's network namespace, with
//     the address HostIP in RealPodSubnet; every node has its own address on it
//     (the node's InternalIP, where its kubelet listens) and its own slice of the
//     subnet for pods (CNI bridge + host-local from Debian's containernetworking-plugins,
//     no gateway, no masquerade). A pod has one route, to the subnet: it reaches the
//     other pods, on every real node, and the machine's addresses on the bridge, and
//     nothing else. IP forwarding is not turned on. Each pod's network namespace is
//     created by containerd under the node's state directory.
//   - DNS: CoreDNS (tools/coredns: the kubernetes plugin only, nothing forwarded) on
//     HostIP:53 answers cluster.local, so a headless Service's pods resolve as
//     <host>.<subdomain>.<ns>.svc.cluster.local; it is every real node's clusterDNS.
//   - images: nothing can be pulled from outside the machine. Options.Images are
//     docker-archive tarballs (package images) imported into every node's containerd
//     before its kubelet starts; the sandbox image is images.Pause. A pod's image can
//     also come from a registry on the machine (StartRegistry). Each node's containerd
//     root (its images, unpacked) is kept between clusters, so that a warm start imports
//     nothing: see realnode_store.go for what keeps that safe.
//   - identities: each kubelet is system:node:<name> (the Node authorizer applies); it
//     serves only clients with a certificate of the cluster CA (the API server's, for
//     logs and exec).
//
// Everything a real node leaves on the machine is removed by Close, and by the next
// Start after a crash (cleanupRealNodes): its processes, the pods' containers and
// mounts, their network namespaces, the bridge and the cgroups; only the kept image
// stores stay, and the next Start removes one its cluster did not close cleanly. Only one cluster with
// real nodes runs on a machine at a time (a lock under /run).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/internal/tools"
)

// The real nodes' network. None of these addresses is routed beyond the bridge.
const (
	// RealBridge is the Linux bridge every real node's pods are attached to.
	RealBridge = "kubestack0"
	// RealPodSubnet holds the host's and nodes' addresses and every pod's.
	RealPodSubnet = "10.89.0.0/16"
	// HostIP is the machine's address on RealBridge: cluster DNS listens here, and pods
	// reach services the tests run on the machine here (ExposeToPods).
	HostIP = "10.89.0.1"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// RealNodePrefix starts every real node's name: real-node-0, real-node-1...
	RealNodePrefix = "real-node-"
	// LabelNodeKind is on every node: "real" or "kwok".
	LabelNodeKind = "kubestack.opendlc.io/node"
)

// http0 checks CoreDNS's and the kubelets' health on loopback (plain HTTP).
var http0 = &http.Client{Timeout: 5 * time.Second}

// realNodeLockDir holds the lock that keeps two clusters with real nodes apart, and the
// record of the running one's state directory (for cleanup after a crash).
const realNodeLockDir = "/run/opendlc-kubestack"

// nodeIP is real node i's address on the bridge; podRange is its pods' slice of the
// subnet (10.89.<i+1>.0/24).
func nodeIP(i int) string { return fmt.Sprintf("10.89.0.%d", 10+i) }

func podRange(i int) (start, end string) {
	return fmt.Sprintf("10.89.%d.2", i+1), fmt.Sprintf("10.89.%d.254", i+1)
}

// realNode is one running real node.
type realNode struct {
	name, ip, dir string
	sock          string // containerd's socket
	kubeletBin    string
	kubeletPort   int
	cgroupRoot    string
	containerd    *process
	kubelet       *process
	// storeKept says the node's containerd found its store as the last cluster left
	// it; imported is how many image tarballs it had to import (realnode_store.go).
	storeKept bool
	imported  int
}

// realNodeBinaries are the components only real nodes need.
type realNodeBinaries struct {
	kubelet, coredns string
	pause            images.Image
}

func (c *Cluster) realNodesDir() string { return filepath.Join(c.Dir, "realnodes") }

// startRealNodes brings up the bridge, CoreDNS and every real node, and imports the
// images into each node's containerd. The nodes' Readiness is awaited with the fake
// nodes' (waitNodesReady).
func (c *Cluster) startRealNodes(ctx context.Context) error {
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("kubestack: real nodes need %s (Debian packages containerd, runc, iproute2; `task deps`): %w", bin, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return fmt.Errorf("kubestack: real nodes need the CNI plugins in /usr/lib/cni (Debian package containernetworking-plugins; `task deps`): %w", err)
	}
	bins, err := ensureRealNodeBinaries(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.realNodesDir(), 0o755); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	if err := setupBridge(c.opts.RealNodes); err != nil {
		return err
	}
	if err := c.startCoreDNS(ctx, bins.coredns); err != nil {
		return err
	}
	imgs := append([]string{bins.pause.Tarball}, c.opts.Images...)
	errs := make([]error, c.opts.RealNodes)
	nodes := make([]*realNode, c.opts.RealNodes)
	var wg sync.WaitGroup
	for i := range c.opts.RealNodes {
		wg.Go(func() { nodes[i], errs[i] = c.startRealNode(ctx, i, bins, imgs) })
	}
	wg.Wait()
	for _, n := range nodes {
		if n != nil {
			c.realNodes = append(c.realNodes, n)
			c.RealNodes = append(c.RealNodes, n.name)
		}
	}
	return errors.Join(errs...)
}

func ensureRealNodeBinaries(ctx context.Context) (realNodeBinaries, error) {
	var b realNodeBinaries
	var err1, err2, err3 error
	var wg sync.WaitGroup
	wg.Go(func() { b.kubelet, err1 = tools.Ensure(ctx, "kubelet") })
	wg.Go(func() { b.coredns, err2 = tools.Ensure(ctx, "coredns") })
	wg.Go(func() { b.pause, err3 = images.Pause(ctx) })
	wg.Wait()
	return b, errors.Join(err1, err2, err3)
}

// lockRealNodes takes the machine-wide lock of clusters with real nodes (waiting while
// another test's cluster holds it), cleans up what a crashed predecessor left, and
// records this cluster's directory. stopRealNodes releases it.
func (c *Cluster) lockRealNodes(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("kubestack: real nodes need root (containerd, the kubelet, a bridge and network namespaces)")
	}
	if err := os.MkdirAll(realNodeLockDir, 0o700); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	unlock, err := tools.Lock(ctx, filepath.Join(realNodeLockDir, "lock"))
	if err != nil {
		return fmt.Errorf("kubestack: waiting for another cluster with real nodes on this machine (lock %s): %w", realNodeLockDir, err)
	}
	record := filepath.Join(realNodeLockDir, "dir")
	if prev, err := os.ReadFile(record); err == nil {
		// The cluster's directory, then (since the stores were kept) the nodes' stores.
		dirs := append(strings.Fields(string(prev)), "")
		if err := cleanupRealNodes(dirs[0], dirs[1]); err != nil {
			unlock()
			return fmt.Errorf("kubestack: cleaning up after the last cluster with real nodes: %w", err)
		}
	}
	// A bridge without a record (the record was removed by hand) goes too.
	_ = exec.Command("ip", "link", "del", RealBridge).Run()
	if err := os.WriteFile(record, []byte(c.realNodesDir()+"\n"+RealNodeStoreDir()+"\n"), 0o600); err != nil {
		unlock()
		return fmt.Errorf("kubestack: %w", err)
	}
	c.unlockRealNodes = func() {
		_ = os.Remove(record)
		unlock()
	}
	return nil
}

// setupBridge creates RealBridge with HostIP and the nodes' addresses.
func setupBridge(nodes int) error {
	cmds := [][]string{
		{"link", "add", RealBridge, "type", "bridge"},
		{"addr", "add", HostIP + "/16", "dev", RealBridge},
	}
	for i := range nodes {
		cmds = append(cmds, []string{"addr", "add", nodeIP(i) + "/16", "dev", RealBridge})
	}
	cmds = append(cmds, []string{"link", "set", RealBridge, "up"})
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubestack: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// corednsUser is CoreDNS's identity: it lists and watches what the kubernetes plugin
// serves, nothing else (RBAC below).
const corednsUser = "kubestack-coredns"

// startCoreDNS runs CoreDNS on HostIP:53 for cluster.local and the reverse zones.
func (c *Cluster) startCoreDNS(ctx context.Context, bin string) error {
	if err := c.ensureCoreDNSRBAC(ctx); err != nil {
		return err
	}
	if _, err := c.pki.issueClient(corednsUser); err != nil {
		return err
	}
	kubeconfig, err := c.writeCertKubeconfig("coredns", corednsUser)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.realNodesDir(), "coredns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	return c.launch(ctx, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, nil, err
		}
		corefile := filepath.Join(dir, "Corefile")
		conf := fmt.Sprintf(`.:53 {
    bind %s
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
}
`, HostIP, ports[0], ports[1], ClusterDomain, kubeconfig)
		if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
			return nil, nil, fmt.Errorf("kubestack: %w", err)
		}
		p, err := startProcess("coredns", bin, []string{"-conf", corefile}, c.logPath("coredns"))
		if err != nil {
			return nil, nil, err
		}
		return p, httpReady(http0, "http://"+loopback(ports[1])+"/ready"), nil
	})
}

func (c *Cluster) ensureCoreDNSRBAC(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubestack:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubestack:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: corednsUser}},
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: %w", err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: %w", err)
	}
	return nil
}

// startRealNode starts node i's containerd, imports imgs into it, and starts its kubelet.
func (c *Cluster) startRealNode(ctx context.Context, i int, bins realNodeBinaries, imgs []string) (*realNode, error) {
	n := &realNode{name: RealNodePrefix + strconv.Itoa(i), ip: nodeIP(i), cgroupRoot: "/kubestack-" + RealNodePrefix + strconv.Itoa(i)}
	n.dir = filepath.Join(c.realNodesDir(), n.name)
	for _, d := range []string{"containerd", "cni", "certs.d", "kubelet", "pods-logs", "ipam"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("kubestack: %w", err)
		}
	}
	n.sock = filepath.Join(n.dir, "containerd", "containerd.sock")
	var err error
	n.storeKept, err = n.openStore()
	if err != nil {
		return nil, err
	}
	if err := n.writeContainerdConfig(bins.pause.Ref); err != nil {
		return nil, err
	}
	if err := n.writeCNIConfig(i); err != nil {
		return nil, err
	}
	if err := n.writeUnreachableRegistries(); err != nil {
		return nil, err
	}
	n.containerd, err = startProcess(n.name+"-containerd", "containerd",
		[]string{"--config", filepath.Join(n.dir, "containerd.toml")}, c.logPath(n.name+"-containerd"))
	if err != nil {
		return nil, err
	}
	c.track(n.containerd)
	if err := n.containerd.Poll(ctx, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "--address", n.sock, "version").Run()
	}); err != nil {
		return n, fmt.Errorf("kubestack: %s: containerd did not start (see %s): %w", n.name, c.logPath(n.name+"-containerd"), err)
	}
	t0 := time.Now()
	n.imported, err = n.importImages(ctx, imgs)
	if err != nil {
		return n, err
	}
	// What the store saved, in <Dir>/real-node-N-store.log.
	_ = writeFile(c.logPath(n.name+"-store"), fmt.Sprintf("store %s (kept %t): %d of %d image tarballs imported in %s\n",
		n.storeDir(), n.storeKept, n.imported, len(imgs), time.Since(t0).Round(time.Millisecond)))
	if err := c.startKubelet(ctx, n, bins.kubelet); err != nil {
		return n, err
	}
	return n, nil
}

// writeContainerdConfig writes the node's containerd configuration: everything under
// the node's directory, the CRI with runc (cgroupfs), the CNI plugins of Debian's
// package with the node's own configuration, and registry host settings in certs.d.
func (n *realNode) writeContainerdConfig(sandboxImage string) error {
	d := filepath.Join(n.dir, "containerd")
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, n.storeRoot(), filepath.Join(d, "state"), n.sock, n.sock+".ttrpc",
		filepath.Join(d, "opt"), sandboxImage, filepath.Join(n.dir, "cni"), filepath.Join(n.dir, "certs.d"))
	return writeFile(filepath.Join(n.dir, "containerd.toml"), conf)
}

// unreachableRegistries are registry hosts an image name may imply (images' own domain,
// Docker Hub's, Kubernetes') whose pulls must never leave the machine: the nodes send
// them to a closed port on loopback, so a missing image fails at once as a pull error.
var unreachableRegistries = []string{images.Domain, "docker.io", "registry.k8s.io"}

func (n *realNode) writeUnreachableRegistries() error {
	for _, host := range unreachableRegistries {
		d := filepath.Join(n.dir, "certs.d", host)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("kubestack: %w", err)
		}
		conf := "server = \"https://127.0.0.1:1\"\n\n[host.\"https://127.0.0.1:1\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
		if err := writeFile(filepath.Join(d, "hosts.toml"), conf); err != nil {
			return err
		}
	}
	return nil
}

// writeCNIConfig attaches the node's pods to RealBridge with addresses from its slice of
// the subnet and no gateway: the pods' only route is the subnet's.
func (n *realNode) writeCNIConfig(i int) error {
	start, end := podRange(i)
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubestack",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "rangeStart": %q, "rangeEnd": %q}]]
      }
    }
  ]
}
`, RealBridge, filepath.Join(n.dir, "ipam"), RealPodSubnet, start, end)
	return writeFile(filepath.Join(n.dir, "cni", "10-kubestack.conflist"), conf)
}

// startKubelet starts the node's kubelet and waits until it serves its health check;
// its Node object's Readiness is awaited with the others'.
func (c *Cluster) startKubelet(ctx context.Context, n *realNode, bin string) error {
	n.kubeletBin = bin
	if err := makeCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	user := "system:node:" + n.name
	if _, err := c.pki.issueClient(user, "system:nodes"); err != nil {
		return err
	}
	kubeconfig, err := c.writeCertKubeconfig(n.name+"-kubelet", user)
	if err != nil {
		return err
	}
	resolv := filepath.Join(n.dir, "resolv.conf")
	// The pods' DNS is the cluster's; the host's resolvers are not passed on.
	if err := writeFile(resolv, "options ndots:5\n"); err != nil {
		return err
	}
	return c.launch(ctx, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, nil, err
		}
		n.kubeletPort = ports[0]
		lease := max(4, int(c.opts.NodeMonitorGracePeriod/time.Second))
		conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
containerRuntimeEndpoint: unix://%[4]s
cgroupDriver: cgroupfs
cgroupRoot: %[5]s
failCgroupV1: false
failSwapOn: false
clusterDNS: [%[6]s]
clusterDomain: %[7]s
resolvConf: %[8]s
podLogsDir: %[9]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[10]s}
authorization: {mode: AlwaysAllow}
nodeLeaseDurationSeconds: %[11]d
nodeStatusUpdateFrequency: 2s
serializeImagePulls: false
imageMinimumGCAge: 24h
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
maxPods: 50
shutdownGracePeriod: 0s
`, n.ip, n.kubeletPort, ports[1], n.sock, n.cgroupRoot, HostIP, ClusterDomain, resolv,
			filepath.Join(n.dir, "pods-logs"), c.pki.caCert, lease)
		confPath := filepath.Join(n.dir, "kubelet.yaml")
		if err := writeFile(confPath, conf); err != nil {
			return nil, nil, err
		}
		args := []string{
			"--config", confPath,
			"--kubeconfig", kubeconfig,
			"--root-dir", filepath.Join(n.dir, "kubelet"),
			"--cert-dir", filepath.Join(n.dir, "kubelet", "pki"),
			"--hostname-override", n.name,
			"--node-ip", n.ip,
			"--node-labels", LabelNodeKind + "=real",
		}
		p, err := startProcess(n.name+"-kubelet", bin, args, c.logPath(n.name+"-kubelet"))
		if err != nil {
			return nil, nil, err
		}
		n.kubelet = p
		return p, httpReady(http0, "http://"+loopback(ports[1])+"/healthz"), nil
	})
}

// makeCgroupRoot creates a node's cgroup root in every cgroup v1 hierarchy (the kubelet
// refuses a cgroupRoot that is missing in one) and the unified one; a new cpuset cgroup
// gets its parent's CPUs and memory nodes, without which no task could join it.
func makeCgroupRoot(root string) error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	for _, e := range entries {
		hier := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(hier, "cgroup.procs")); err != nil || !e.IsDir() {
			continue // not a hierarchy
		}
		dir := filepath.Join(hier, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("kubestack: cgroup root %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(hier, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
				if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
					return fmt.Errorf("kubestack: %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// waitRealNodesReady waits until every real node is Ready.
func (c *Cluster) waitRealNodesReady(ctx context.Context) error {
	for _, name := range c.RealNodes {
		for {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && nodeReady(n) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kubestack: real node %s not Ready (see %s): %w", name, c.logPath(name+"-kubelet"), ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stopRealNodes stops every kubelet, then removes every pod's containers and the
// containerds, and cleans the machine (cleanupRealNodes).
func (c *Cluster) stopRealNodes() error {
	if c.unlockRealNodes == nil {
		return nil
	}
	var errs []error
	for _, n := range c.realNodes {
		if n.kubelet != nil {
			errs = append(errs, n.kubelet.Stop())
		}
	}
	// Each containerd removes its containers and stops; its store is marked clean for
	// the next cluster only if all of that went well (realnode_store.go).
	stopErrs := make([]error, len(c.realNodes))
	var wg sync.WaitGroup
	for i, n := range c.realNodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stopErrs[i] = n.closeStore(ctx)
		})
	}
	wg.Wait()
	errs = append(errs, stopErrs...)
	errs = append(errs, cleanupRealNodes(c.realNodesDir(), RealNodeStoreDir()))
	c.unlockRealNodes()
	c.unlockRealNodes = nil
	return errors.Join(errs...)
}

// cleanupRealNodes removes what the real nodes under dir left on the machine: every
// process whose command line names dir (containerd, its shims, kubelets, CoreDNS) and
// the containers' processes in the nodes' cgroups, every mount under dir (the pods'
// volumes, rootfs and network namespaces) and under the nodes' kept stores (store,
// where the pods' /dev/shm are; empty: none), the nodes' cgroups, and the bridge. A
// store left unmarked is removed by the next Start (realnode_store.go).
func cleanupRealNodes(dir, store string) error {
	if dir == "" || dir == "/" {
		return nil
	}
	var errs []error
	killUnder(dir)
	errs = append(errs, unmountUnder(dir))
	if store != "" && store != "/" {
		errs = append(errs, unmountUnder(store))
	}
	errs = append(errs, removeCgroups())
	if exec.Command("ip", "link", "show", RealBridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", RealBridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", RealBridge, err, out))
		}
	}
	return errors.Join(errs...)
}

// killUnder SIGKILLs every process whose command line mentions dir, and every process
// in a real node's cgroup (containers), until none is left (at most five seconds).
func killUnder(dir string) {
	for range 50 {
		pids := append(pidsMentioning(dir), pidsInNodeCgroups()...)
		pids = slices.DeleteFunc(pids, func(p int) bool { return p == os.Getpid() })
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func pidsMentioning(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// nodeCgroupDirs are the real nodes' cgroup roots under every v1 controller and the
// unified hierarchy.
func nodeCgroupDirs() []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubestack-" + RealNodePrefix + "*", "/sys/fs/cgroup/kubestack-" + RealNodePrefix + "*"} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	return dirs
}

func pidsInNodeCgroups() []int {
	var pids []int
	for _, root := range nodeCgroupDirs() {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, walkErr error) error {
			if walkErr != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil //nolint:nilerr // a cgroup removed meanwhile: nothing to kill there
			}
			data, readErr := os.ReadFile(p)
			if readErr != nil {
				return nil //nolint:nilerr // as above
			}
			for f := range strings.FieldsSeq(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the nodes' cgroups, deepest first (a cgroup is removed with
// rmdir once it has no process and no child).
func removeCgroups() error {
	var errs []error
	for _, root := range nodeCgroupDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder unmounts every mount point under dir, deepest first (lazily, so a
// mount still held by an exiting process goes too).
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	return nil
}

// ExposeToPods makes a TCP service on the machine's loopback (addr, host:port)
// reachable from the real nodes' pods: it listens on HostIP and forwards each
// connection to addr, until Close. It returns the address pods dial, HostIP:port.
func (c *Cluster) ExposeToPods(addr string) (string, error) {
	if len(c.realNodes) == 0 {
		return "", errors.New("kubestack: ExposeToPods needs real nodes")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(HostIP, "0"))
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	c.mu.Lock()
	c.forwarders = append(c.forwarders, l)
	c.mu.Unlock()
	go forward(l, addr)
	return l.Addr().String(), nil
}

func forward(l net.Listener, addr string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = copyConn(out, in); done <- struct{}{} }()
			go func() { _, _ = copyConn(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

// copyConn copies until EOF, then half-closes dst's write side so the other direction
// can finish.
func copyConn(dst, src net.Conn) (int64, error) {
	n, err := io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	return n, err
}

// KillContainer sends SIGKILL to a container of a pod on a real node through the node's
// containerd (as a crashed or OOM-killed process would die), and returns the node's name.
// The kubelet sees the container exit with code 137.
func (c *Cluster) KillContainer(ctx context.Context, namespace, pod, container string) (string, error) {
	p, err := c.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	i := slices.IndexFunc(c.realNodes, func(n *realNode) bool { return n.name == p.Spec.NodeName })
	if i < 0 {
		return "", fmt.Errorf("kubestack: pod %s/%s is on %q, not on a real node", namespace, pod, p.Spec.NodeName)
	}
	n := c.realNodes[i]
	filter := fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s,labels."io.kubernetes.container.name"==%s`, p.UID, container)
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "containers", "ls", "-q", filter).CombinedOutput()
	if err != nil {
		return n.name, fmt.Errorf("kubestack: ctr containers ls: %w: %s", err, out)
	}
	ids := strings.Fields(string(out))
	killed := 0
	for _, id := range ids {
		// Earlier, exited instances of the container have no running task: skip them.
		if out, err := exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput(); err == nil {
			killed++
		} else if !strings.Contains(string(out), "not found") && !strings.Contains(string(out), "not running") {
			return n.name, fmt.Errorf("kubestack: ctr tasks kill %s: %w: %s", id, err, out)
		}
	}
	if killed == 0 {
		return n.name, fmt.Errorf("kubestack: no running container %q of pod %s/%s on %s (containers %v)", container, namespace, pod, n.name, ids)
	}
	// The fault happened: containerd reports the task stopped (or already removed).
	for {
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
		if err != nil {
			return n.name, fmt.Errorf("kubestack: ctr tasks ls: %w: %s", err, out)
		}
		running := false
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) >= 3 && slices.Contains(ids, f[0]) && f[2] == "RUNNING" {
				running = true
			}
		}
		if !running {
			return n.name, nil
		}
		select {
		case <-ctx.Done():
			return n.name, fmt.Errorf("kubestack: container %q of pod %s/%s still running after SIGKILL: %w", container, namespace, pod, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StopKubelet stops a real node's kubelet and every container on it, as if the machine
// had gone away: its heartbeats stop, and the controller manager marks it NotReady
// after the node monitor grace period. The node's containerd keeps running, empty.
func (c *Cluster) StopKubelet(ctx context.Context, node string) error {
	i := slices.IndexFunc(c.realNodes, func(n *realNode) bool { return n.name == node })
	if i < 0 {
		return fmt.Errorf("kubestack: %q is not a real node", node)
	}
	n := c.realNodes[i]
	err := n.kubelet.Stop()
	out, lerr := exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "ls", "-q").CombinedOutput()
	if lerr != nil {
		return errors.Join(err, fmt.Errorf("kubestack: ctr tasks ls: %w: %s", lerr, out))
	}
	for id := range strings.FieldsSeq(string(out)) {
		_ = exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).Run()
	}
	return err
}

// StartKubelet starts a real node's kubelet again after StopKubelet and waits until the
// node is Ready.
func (c *Cluster) StartKubelet(ctx context.Context, node string) error {
	i := slices.IndexFunc(c.realNodes, func(n *realNode) bool { return n.name == node })
	if i < 0 {
		return fmt.Errorf("kubestack: %q is not a real node", node)
	}
	n := c.realNodes[i]
	if err := c.startKubelet(ctx, n, n.kubeletBin); err != nil {
		return err
	}
	for {
		nd, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil && nodeReady(nd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubestack: %s not Ready again: %w", node, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
