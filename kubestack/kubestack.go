// Package kubestack starts a real Kubernetes control plane for integration
// tests: etcd, kube-apiserver, kube-scheduler and kube-controller-manager,
// built from their Go modules by internal/tools, and kwok, which plays the
// kubelets of fake GPU nodes and drives the pods on them through stages
// (Running, Succeeded after a delay, Failed on demand) instead of running
// containers. Beside them, Options.RealNodes starts real nodes whose kubelets
// run containers under containerd and runc, on a pod network and with a
// cluster DNS that exist only on this machine (realnode.go, and
// docs/test-cluster.md). Everything listens on 127.0.0.1 (real nodes: on their
// bridge) and keeps its state in one directory. Nothing here is meant for
// production.
//
// Pods scheduled onto the fake nodes go Pending → Running within about half
// a second. Tests steer them further with labels and annotations:
//
//   - AnnotationCompleteAfter ("30s", "1500ms") makes a running pod succeed
//     after that delay, every container terminated with exit code 0;
//   - FailPod (LabelFail and AnnotationExitCode) makes a running pod fail with
//     the given exit code;
//   - SetNodeNotReady (LabelNodeNotReady) makes a node NotReady, after which
//     the controller manager taints it and evicts its pods.
//   - StopNodeHeartbeat makes kwok stop renewing a node's Lease, after which
//     the controller manager marks it Unknown (ResumeNodeHeartbeat undoes it).
//   - LabelImagePullError, or ImagePullErrorMarker in an image's name, keeps a
//     pod Pending with its image pull failing (ErrImagePull, then
//     ImagePullBackOff).
//
// Pod logs come from files: SetPodLogs makes kwok serve a pod's container
// logs, which the API server reaches as it would a kubelet (see logs.go).
//
// Without either a pod runs until it is deleted. The stages do not act on
// restartPolicy: a pod that completes or fails is never restarted. Deleted
// pods disappear about 100 ms later, as if their containers had exited at
// once on SIGTERM.
package kubestack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/internal/freeport"
	"github.com/opendlc/opendlc/internal/tools"
)

// Defaults for Options.
const (
	DefaultNodes                  = 3
	DefaultGPUsPerNode            = 8
	DefaultNodeCPU                = "32"
	DefaultNodeMemory             = "256Gi"
	DefaultNodeMonitorGracePeriod = 10 * time.Second
)

// Address ranges inside the simulated cluster; none of them is routed.
const (
	serviceClusterIPRange = "10.96.0.0/16"
	kubernetesServiceIP   = "10.96.0.1" // first address of serviceClusterIPRange
	podCIDR               = "10.244.0.0/16"
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
)

// startTimeout bounds how long Start waits for the components once their
// binaries are built.
const startTimeout = 3 * time.Minute

// realNodesStartTimeout is startTimeout for a cluster with real nodes.
const realNodesStartTimeout = 10 * time.Minute

// Options configures Start.
type Options struct {
	// Dir holds every component's state, keys and logs (Dir/<component>.log).
	// Required. Starting again on the same Dir keeps the cluster's objects.
	Dir string
	// Nodes is how many fake nodes to create, kwok-node-0..Nodes-1; 0 means
	// DefaultNodes, a negative number none (a cluster of real nodes only).
	Nodes int
	// RealNodes is how many real nodes to start beside the fake ones,
	// real-node-0..RealNodes-1: a kubelet and a containerd each, whose pods run
	// containers (realnode.go). Needs root and Debian's containerd, runc and
	// containernetworking-plugins. 0: none.
	RealNodes int
	// Images are docker-archive tarballs (package images) imported into every real
	// node's containerd before its kubelet starts, so pods can name them with
	// imagePullPolicy IfNotPresent or Never. Only with RealNodes.
	Images []string
	// GPUsPerNode is each node's nvidia.com/gpu capacity; 0 means DefaultGPUsPerNode.
	GPUsPerNode int
	// NodeCPU and NodeMemory are each node's cpu and memory capacity as
	// Kubernetes quantities; defaults DefaultNodeCPU and DefaultNodeMemory.
	NodeCPU, NodeMemory string
	// NodeMonitorGracePeriod is how long the controller manager waits for a
	// node's heartbeat before it marks the node Unknown and taints it;
	// default DefaultNodeMonitorGracePeriod (Kubernetes' own default is 50s).
	NodeMonitorGracePeriod time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("kubestack: Options.Dir is required")
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.GPUsPerNode == 0 {
		o.GPUsPerNode = DefaultGPUsPerNode
	}
	if o.NodeCPU == "" {
		o.NodeCPU = DefaultNodeCPU
	}
	if o.NodeMemory == "" {
		o.NodeMemory = DefaultNodeMemory
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if o.Nodes < 0 {
		o.Nodes = 0
	}
	if o.RealNodes < 0 || o.RealNodes > 8 || len(o.Images) > 0 && o.RealNodes == 0 {
		return o, fmt.Errorf("kubestack: bad options: %d real nodes (0 to 8) with %d images (only with real nodes)", o.RealNodes, len(o.Images))
	}
	if o.GPUsPerNode < 0 || o.NodeMonitorGracePeriod < 2*time.Second {
		return o, fmt.Errorf("kubestack: bad options: %d nodes, %d GPUs per node, node monitor grace period %s (minimum 2s)",
			o.Nodes, o.GPUsPerNode, o.NodeMonitorGracePeriod)
	}
	return o, nil
}

// Cluster is a running control plane with its fake nodes.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// Server is the API server's URL, https://127.0.0.1:PORT.
	Server string
	// CAFile is the path of the cluster CA's certificate, which signed the
	// API server's serving certificate.
	CAFile string
	// AdminKubeconfig is the path of a kubeconfig for a cluster
	// administrator (a client certificate in group system:masters).
	AdminKubeconfig string
	// Admin is the REST config of that administrator.
	Admin *rest.Config
	// Client is a clientset for Admin.
	Client kubernetes.Interface
	// Nodes are the names of the fake nodes, all Ready and schedulable.
	Nodes []string
	// RealNodes are the names of the real nodes (Options.RealNodes), all Ready.
	RealNodes []string

	pki   pki
	opts  Options
	procs []*process // in start order; Close stops them in reverse
	mu    sync.Mutex // guards procs and forwarders during Close

	realNodes       []*realNode
	unlockRealNodes func()         // set while the real nodes' machine-wide lock is held
	forwarders      []net.Listener // ExposeToPods
}

// binaries are the paths of the built components.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok string
}

// Start builds the components if needed (the first build takes about ten
// minutes on two cores; later ones are cached, see internal/tools), starts
// them, creates the fake nodes, and returns once the nodes are Ready and
// untainted and the default service account exists. ctx bounds the start
// only; the cluster runs until Close. On error, whatever had started is
// stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	opts.Dir = dir
	bins, err := ensureBinaries(ctx)
	if err != nil {
		return nil, err
	}
	p, err := loadOrCreatePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, CAFile: p.caCert, pki: p, opts: opts}
	timeout := startTimeout
	if opts.RealNodes > 0 {
		// One cluster with real nodes at a time on a machine: wait for the lock as long
		// as ctx allows, before the start's own clock runs.
		if err := c.lockRealNodes(ctx); err != nil {
			return nil, err
		}
		// Importing the images into each node's containerd takes a while.
		timeout = realNodesStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.start(ctx, bins); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// ensureBinaries builds (once) the four control-plane binaries, which share
// one build, and kwok, which has its own, side by side.
func ensureBinaries(ctx context.Context) (binaries, error) {
	var b binaries
	targets := map[string]*string{
		"etcd": &b.etcd, "kube-apiserver": &b.apiserver, "kube-controller-manager": &b.controllerManager,
		"kube-scheduler": &b.scheduler, "kwok": &b.kwok,
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for name, dst := range targets {
		wg.Go(func() {
			path, err := tools.Ensure(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			*dst = path
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return b, errors.Join(errs...)
}

func (c *Cluster) start(ctx context.Context, bins binaries) error {
	etcdURL, err := c.startEtcd(ctx, bins.etcd)
	if err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, bins.apiserver, etcdURL); err != nil {
		return err
	}
	// kwok watches Logs objects from its start.
	if err := c.installLogsCRD(ctx); err != nil {
		return err
	}
	// The two controllers and kwok only need the API server; start them together.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() { errs[0] = c.startControllerManager(ctx, bins.controllerManager) })
	wg.Go(func() { errs[1] = c.startScheduler(ctx, bins.scheduler) })
	wg.Go(func() { errs[2] = c.startKwok(ctx, bins.kwok) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if c.opts.RealNodes > 0 {
		if err := c.startRealNodes(ctx); err != nil {
			return err
		}
	}
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	if err := c.waitRealNodesReady(ctx); err != nil {
		return err
	}
	return c.waitNodesReady(ctx)
}

// Close stops every component, kwok and the controllers first and etcd
// last: SIGTERM, then SIGKILL for any still running after ten seconds. The
// state directory is kept.
func (c *Cluster) Close() error {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	forwarders := c.forwarders
	c.forwarders = nil
	c.mu.Unlock()
	var errs []error
	for _, l := range forwarders {
		l.Close()
	}
	// The real nodes' kubelets and containerds first, with every container.
	errs = append(errs, c.stopRealNodes())
	// kwok, the scheduler and the controller manager do not depend on each
	// other: stop them together, then the API server, then etcd.
	var clients, servers []*process
	for _, p := range procs {
		switch p.Name() {
		case "etcd", "kube-apiserver":
			servers = append(servers, p)
		default:
			clients = append(clients, p)
		}
	}
	errs = append(errs, stopAll(clients))
	for _, server := range slices.Backward(servers) {
		errs = append(errs, server.Stop())
	}
	return errors.Join(errs...)
}

func stopAll(ps []*process) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) track(p *process) {
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
}

// launch starts a component with attempt and waits until ready says it
// serves. A port found free can be taken by another process before the
// component binds it; then one more attempt picks new ports.
func (c *Cluster) launch(ctx context.Context, attempt func() (*process, func(context.Context) error, error)) error {
	for try := 0; ; try++ {
		p, ready, err := attempt()
		if err != nil {
			return err
		}
		err = p.Poll(ctx, ready)
		if err == nil {
			c.track(p)
			return nil
		}
		stopErr := p.Stop()
		if try == 0 && p.AddrInUse() {
			continue
		}
		return errors.Join(err, stopErr)
	}
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.Dir, name+".log") }

// startEtcd runs the single etcd member and returns its client URL.
func (c *Cluster) startEtcd(ctx context.Context, bin string) (string, error) {
	var clientURL string
	err := c.launch(ctx, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, nil, err
		}
		clientURL = "http://" + loopback(ports[0])
		args := []string{
			"--name", "kubestack",
			"--data-dir", filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls", clientURL,
			"--listen-peer-urls", "http://" + loopback(ports[1]),
			// Test data: losing it on a machine crash is fine; fsync on
			// every write would slow every API call down.
			"--unsafe-no-fsync",
		}
		p, err := startProcess("etcd", bin, args, c.logPath("etcd"))
		if err != nil {
			return nil, nil, err
		}
		return p, httpReady(http.DefaultClient, clientURL+"/health"), nil
	})
	return clientURL, err
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, etcdURL string) error {
	return c.launch(ctx, func() (*process, func(context.Context) error, error) {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		c.Server = "https://" + loopback(port)
		args := []string{
			"--etcd-servers", etcdURL,
			"--bind-address", "127.0.0.1",
			"--advertise-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(port),
			"--tls-cert-file", c.pki.servingCert,
			"--tls-private-key-file", c.pki.servingKey,
			"--client-ca-file", c.pki.caCert,
			// Request-header authentication, as kubeadm sets it up: without
			// it the scheduler and controller manager log an error every few
			// seconds, and aggregated API servers could not be added.
			"--requestheader-client-ca-file", c.pki.caCert,
			"--requestheader-allowed-names", frontProxyUser,
			"--requestheader-username-headers", "X-Remote-User",
			"--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
			"--proxy-client-cert-file", c.pki.client(frontProxyUser).cert,
			"--proxy-client-key-file", c.pki.client(frontProxyUser).key,
			"--service-account-issuer", serviceAccountIssuer,
			"--service-account-key-file", c.pki.saPub,
			"--service-account-signing-key-file", c.pki.saKey,
			"--authorization-mode", "Node,RBAC",
			"--service-cluster-ip-range", serviceClusterIPRange,
			// The kubernetes Service would get 127.0.0.1 as its endpoint,
			// which endpoint validation refuses; nothing in the simulated
			// cluster dials it.
			"--endpoint-reconciler-type", "none",
			"--cert-dir", filepath.Join(c.Dir, "kube-apiserver"),
			"--profiling=false",
			// Pod logs: the fake nodes' kubelet endpoint is kwok's server on
			// 127.0.0.1 (logs.go). Their Hostname address does not resolve,
			// and without --kubelet-certificate-authority the API server does
			// not verify the kubelet's certificate (kwok's is self-signed).
			"--kubelet-preferred-address-types", "InternalIP",
			// The real nodes' kubelets accept only clients with a certificate of the
			// cluster CA (realnode.go); kwok's endpoint asks for none.
			"--kubelet-client-certificate", c.pki.client(kubeletClientUser).cert,
			"--kubelet-client-key", c.pki.client(kubeletClientUser).key,
		}
		p, err := startProcess("kube-apiserver", bin, args, c.logPath("kube-apiserver"))
		if err != nil {
			return nil, nil, err
		}
		if err := c.writeAdmin(); err != nil {
			return p, nil, errors.Join(err, p.Stop())
		}
		return p, func(ctx context.Context) error {
			_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}, nil
	})
}

// writeAdmin writes the admin kubeconfig for the current Server and builds
// the admin REST config and clientset from it.
func (c *Cluster) writeAdmin() error {
	path, err := c.writeCertKubeconfig("admin", adminUser)
	if err != nil {
		return err
	}
	cfg, err := restConfigFromKubeconfig(path)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	c.AdminKubeconfig, c.Admin, c.Client = path, cfg, client
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context, bin string) error {
	return c.startController(ctx, "kube-controller-manager", bin, controllerManagerUser,
		// Each controller acts as its own service account, with the
		// RBAC roles Kubernetes defines for it, as in a real cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file", c.pki.saKey,
		"--root-ca-file", c.pki.caCert,
		"--cluster-signing-cert-file", c.pki.caCert,
		"--cluster-signing-key-file", c.pki.caKey,
		"--cluster-name", "kubestack",
		"--node-monitor-period", "1s",
		"--node-monitor-grace-period", c.opts.NodeMonitorGracePeriod.String(),
	)
}

func (c *Cluster) startScheduler(ctx context.Context, bin string) error {
	return c.startController(ctx, "kube-scheduler", bin, schedulerUser)
}

// startController starts kube-controller-manager or kube-scheduler (name) as the
// client certificate user, with what both take (the kubeconfig for everything, a
// secure port on loopback, no leader election, no profiling) and the arguments
// extra, and waits for its /healthz.
func (c *Cluster) startController(ctx context.Context, name, bin, user string, extra ...string) error {
	kubeconfig, err := c.writeCertKubeconfig(name, user)
	if err != nil {
		return err
	}
	return c.launchHealthz(ctx, name, bin, func(port int) []string {
		args := []string{
			"--kubeconfig", kubeconfig,
			"--authentication-kubeconfig", kubeconfig,
			"--authorization-kubeconfig", kubeconfig,
			"--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(port),
			"--leader-elect=false",
			"--profiling=false",
		}
		return append(args, extra...)
	})
}

// launchHealthz launches name on a free port (see launch), with the arguments args
// makes for that port, with extraEnv; it is ready when https://127.0.0.1:port/healthz
// answers 200.
func (c *Cluster) launchHealthz(ctx context.Context, name, bin string, args func(port int) []string, extraEnv ...string) error {
	return c.launch(ctx, func() (*process, func(context.Context) error, error) {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		p, err := startProcess(name, bin, args(port), c.logPath(name), extraEnv...)
		if err != nil {
			return nil, nil, err
		}
		return p, httpReady(insecureLoopbackClient, "https://"+loopback(port)+"/healthz"), nil
	})
}

func (c *Cluster) startKwok(ctx context.Context, bin string) error {
	kubeconfig, err := c.writeCertKubeconfig("kwok", kwokUser)
	if err != nil {
		return err
	}
	home := filepath.Join(c.Dir, "kwok")
	stagesPath, err := writeStages(home)
	if err != nil {
		return err
	}
	// kwok renews each node's Lease every quarter of its duration; a
	// duration as long as the grace period renews four times within it.
	lease := max(4, int(c.opts.NodeMonitorGracePeriod/time.Second))
	// kwok's server plays every fake node's kubelet endpoint (pod logs, see
	// logs.go): the nodes advertise 127.0.0.1 and its port, which the heartbeat
	// stage keeps current across restarts. kwok also reads $HOME/.kwok/kwok.yaml;
	// a HOME of its own keeps a developer's configuration out of the tests. Its
	// nodes are checked later by waitNodesReady (failing early if kwok exits, say
	// on a bad stage).
	return c.launchHealthz(ctx, "kwok", bin, func(port int) []string {
		return []string{
			"--kubeconfig", kubeconfig,
			"--config", stagesPath,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector", AnnotationKwokNode + "=" + kwokNodeValue,
			"--node-lease-duration-seconds", strconv.Itoa(lease),
			"--cidr", podCIDR,
			"--node-ip", "127.0.0.1",
			"--node-port", strconv.Itoa(port),
			"--server-address", loopback(port),
			"--enable-crds", "Logs",
		}
	}, "HOME="+home)
}

// insecureLoopbackClient checks the health of the scheduler and the
// controller manager, which serve on 127.0.0.1 with self-signed certificates.
var insecureLoopbackClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health checks only
}}

// httpReady returns a readiness check that GETs url and wants a 200.
func httpReady(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// freePort returns a free TCP port on 127.0.0.1 from below the kernel's ephemeral range
// (package freeport says why). Another process can still take it before our component
// binds it; launch retries once on that.
func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct free ports, as freePort.
func freePorts(n int) ([]int, error) {
	ports, err := freeport.Take(n)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	return ports, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
