// Package kube is the Kubernetes backend: every replica of a gang is a pod, and the
// gang's replicas find each other through a headless Service.
//
// Per gang (one attempt of one job), in the namespace its workspace maps to:
//
//	Service <job>-a<attempt>            headless, selects the gang's pods; owns them
//	Pod     <job>-<role>-<index>-a<attempt>
//	        hostname <role>-<index>, subdomain <service>, so every replica is reachable
//	        at <role>-<index>.<service>.<namespace>.svc
//
// The Service is the gang's record: its annotations hold the replica list in GangSpec
// order (so Observe works after a worker restart with nothing in memory), whether Launch
// finished creating the pods (so a pod that vanishes afterwards is reported Failed rather
// than not-created-yet), and whether the gang was stopped (so Stop is final and Observe
// reports Stopped, whichever worker asks). Every pod has the Service as its controller
// owner, so deleting the Service garbage-collects the pods.
//
// Reads go through one cluster-wide informer pair (pods and services carrying the label
// opendlc.io/managed-by=opendlc), started on first use; a read that misses the cache (just
// created, or the cache has not synced yet) falls back to the API server, so a freshly
// launched gang is never reported not found. The worker therefore needs list and watch
// on pods and services cluster-wide, which deploy/rbac.yaml grants (see PolicyRules).
//
// Every object is created with a deterministic name, and AlreadyExists counts as
// success, so a Launch retried after a worker crash creates nothing twice.
package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

var _ backend.Backend = (*Backend)(nil)

// Defaults of the options.
const (
	// DefaultRendezvousPort is the port rank 0 serves the rendezvous on (MASTER_PORT).
	// Every replica is its own pod with its own IP, so one fixed port serves every gang.
	DefaultRendezvousPort = 23456
	// DefaultStopGracePeriod is how long a stopped pod's container has between SIGTERM
	// and SIGKILL: Kubernetes's own default, time for a trainer to flush a checkpoint.
	DefaultStopGracePeriod = 30 * time.Second
	// DefaultPollInterval bounds how long a wait (Stop, FollowLogs) goes without
	// re-reading state when no informer event wakes it.
	DefaultPollInterval = time.Second
)

// Backend runs gangs as pods. It is safe for concurrent use. Close stops its informers.
type Backend struct {
	client kubernetes.Interface

	nodeStats bool                      // WithNodeStats (resources.go)
	dcgmPort  int                       // WithDCGMExporter (dcgm.go); 0: none
	summaries freshCache[*statsSummary] // the kubelets' statistics by node, briefly kept
	gpus      freshCache[[]dcgmGPU]     // the DCGM exporters' readings by node IP, briefly kept

	nsPrefix         string
	createNamespaces bool
	onlyNamespaces   []string // namespaced mode (namespaces.go); nil: cluster-wide
	healthOff        bool     // node health checks off (WithHealthChecks)
	port             int
	env              []schemas.EnvVar
	envSecret        string
	s3Creds          S3CredentialsFunc // the workspace S3 Secret's contents (s3creds.go)
	pullPolicy       corev1.PullPolicy
	pullSecrets      []string
	serviceAccount   string
	runAsUser        *int64
	shmSize          resource.Quantity
	sshPath          string
	podAnnotations   map[string]string
	pools            map[schemas.Pool]PoolConfig
	batch            map[schemas.Pool]BatchScheduling // pools whose gangs a batch scheduler places (batchsched.go)
	dynamic          dynamic.Interface                // for the batch schedulers' PodGroups
	grace            time.Duration
	resync           time.Duration
	clock            clock.WithTicker
	logger           *slog.Logger
	poll             time.Duration
	logLimiter       flowcontrol.PassiveRateLimiter // log opens (logs_rate.go)
	launchSlots      chan struct{}                  // gangs launching at once (launch_slots.go)
	health           healthConfig                   // node health checks and quarantine (health.go)
	transient        transientConfig                // image pull and node-lost grace periods (transient.go)

	cache *podCache
	nodes *nodeCache

	mu         sync.Mutex
	gangs      map[string]*gangLock // by gang ID: serialises Launch, Stop and Cleanup in this process
	stopped    map[string]bool      // gang IDs this Backend stopped, for reads that race the cache
	namespaces map[string]bool      // namespaces known to exist
}

// gangLock serialises the operations of one gang within this process, so a Stop never
// misses a pod a concurrent Launch is creating. Across processes, Launch re-reads the
// Service's stopped mark after creating its pods instead (see Launch).
type gangLock struct{ sync.Mutex }

// Option configures a Backend.
type Option func(*Backend) error

// WithNamespacePrefix maps workspace W to namespace prefix+W, for clusters where
// OpenDLC's namespaces share a name space with others ("dlc-" gives dlc-vision). Default:
// "" (the namespace is the workspace's name). A name longer than 63 characters is
// shortened deterministically (a prefix and a hash).
func WithNamespacePrefix(prefix string) Option {
	return func(b *Backend) error {
		if prefix != "" && len(validation.IsDNS1123Label(prefix+"x")) > 0 {
			return fmt.Errorf("kube: namespace prefix %q: must be lowercase letters, digits and '-', starting with a letter or digit", prefix)
		}
		b.nsPrefix = prefix
		return nil
	}
}

// WithCreateNamespaces says whether Launch creates a workspace's namespace when it is
// missing. Turn it off where namespaces are provisioned by an administrator; the worker
// then needs no permission on namespaces. Default: true.
func WithCreateNamespaces(create bool) Option {
	return func(b *Backend) error {
		b.createNamespaces = create
		return nil
	}
}

// WithRendezvousPort sets the rendezvous port (MASTER_PORT) of every gang; frameworks
// that need more named ports get the following ones. Default: DefaultRendezvousPort.
func WithRendezvousPort(port int) Option {
	return func(b *Backend) error {
		if port < 1 || port > 65535-8 {
			return fmt.Errorf("kube: rendezvous port %d out of range", port)
		}
		b.port = port
		return nil
	}
}

// WithEnv adds variables to every replica's environment, before the replica's own (so
// a job can override them). For values that are not secret, such as the S3 endpoint:
// pod specs are readable by anyone who can get pods. Default: none. Repeated options
// accumulate.
func WithEnv(env ...schemas.EnvVar) Option {
	return func(b *Backend) error {
		b.env = append(b.env, env...)
		return nil
	}
}

// WithEnvFromSecret injects every key of the named Secret (in the gang's namespace) into
// every replica's environment through envFrom. This is how S3 credentials reach pods:
// the worker never reads them, and they never pass through Temporal's history. Explicit
// variables win over the Secret's. Default: none.
func WithEnvFromSecret(name string) Option {
	return func(b *Backend) error {
		if name != "" && len(validation.IsDNS1123Subdomain(name)) > 0 {
			return fmt.Errorf("kube: secret name %q is not a valid object name", name)
		}
		b.envSecret = name
		return nil
	}
}

// WithImagePullPolicy sets every container's image pull policy. Default: "" (Kubernetes
// decides: Always for :latest or untagged images, IfNotPresent otherwise).
func WithImagePullPolicy(p corev1.PullPolicy) Option {
	return func(b *Backend) error {
		switch p {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			b.pullPolicy = p
			return nil
		}
		return fmt.Errorf("kube: unknown image pull policy %q", p)
	}
}

// WithImagePullSecrets names Secrets (in the gang's namespace) holding registry
// credentials for every pod; a pool's policy and a job's spec.pod add theirs. Default:
// none.
func WithImagePullSecrets(names ...string) Option {
	return func(b *Backend) error {
		b.pullSecrets = append(b.pullSecrets, names...)
		return nil
	}
}

// WithServiceAccount runs every pod as the named service account, with its token
// mounted as the account says, unless its pool's policy or its job names another.
// Default: "" (the namespace's default account, with no token mounted: training code
// has no business with the Kubernetes API).
func WithServiceAccount(name string) Option {
	return func(b *Backend) error {
		b.serviceAccount = name
		return nil
	}
}

// WithRunAsUser runs every container as this user id. A pool whose policy is
// SecurityRestricted runs pods as non-root, so an image whose USER is root (or unset)
// cannot start there without this. Default: the image's user.
func WithRunAsUser(uid int64) Option {
	return func(b *Backend) error {
		if uid <= 0 {
			return fmt.Errorf("kube: run-as user %d: must be a non-root user id", uid)
		}
		b.runAsUser = &uid
		return nil
	}
}

// WithSSHAuthMountPath sets the directory where the pods of a gang whose launcher
// uses ssh (MPI) find the gang's key pair: id_rsa, id_rsa.pub and authorized_keys, as
// mpi-operator's sshAuthMountPath. It should be the .ssh directory of the images'
// user; a job's spec.pod.sshAuthMountPath wins over it. Default:
// DefaultSSHAuthMountPath.
func WithSSHAuthMountPath(dir string) Option {
	return func(b *Backend) error {
		if !path.IsAbs(dir) || path.Clean(dir) != dir {
			return fmt.Errorf("kube: ssh auth mount path %q: must be a clean absolute path", dir)
		}
		b.sshPath = dir
		return nil
	}
}

// PoolConfig is where a resource pool's pods go: quota, public and spot map to node
// selectors, tolerations and a priority class of the cluster; and what its pods may do
// (Policy).
type PoolConfig struct {
	NodeSelector      map[string]string
	Tolerations       []corev1.Toleration
	PriorityClassName string
	Policy            PodPolicy
	// PlacementTimeout is the placement timeout of the pool's jobs that set none
	// (placement.go): zero means backend.DefaultPlacementTimeout, negative none.
	PlacementTimeout time.Duration
	// Autoscaled marks a pool whose nodes come on demand (a cluster autoscaler adds
	// them for pending pods): Launch does not refuse a gang that the present nodes
	// cannot hold.
	Autoscaled bool
}

// WithPool configures a resource pool. Default: no pool configured, so the pool
// changes nothing about where pods go, and its policy is the zero PodPolicy.
func WithPool(pool schemas.Pool, c PoolConfig) Option {
	return func(b *Backend) error {
		if b.pools == nil {
			b.pools = map[schemas.Pool]PoolConfig{}
		}
		b.pools[pool] = c
		return nil
	}
}

// WithPodAnnotations adds annotations to every pod, for admission webhooks, service
// meshes or simulators (kwok reads its stage parameters from annotations). Default:
// none. Repeated options accumulate.
func WithPodAnnotations(a map[string]string) Option {
	return func(b *Backend) error {
		if b.podAnnotations == nil {
			b.podAnnotations = map[string]string{}
		}
		maps.Copy(b.podAnnotations, a)
		return nil
	}
}

// WithStopGracePeriod sets how long a stopped replica has between SIGTERM and SIGKILL
// (the pods' terminationGracePeriodSeconds and Stop's delete grace period). A pod still
// present 15s after that (its node is gone, so nobody confirms the kill) is deleted with
// no grace. Default: DefaultStopGracePeriod.
func WithStopGracePeriod(d time.Duration) Option {
	return func(b *Backend) error {
		if d < 0 {
			return fmt.Errorf("kube: negative stop grace period %v", d)
		}
		b.grace = d
		return nil
	}
}

// WithResync sets the informers' resync period. Reads come from the informers' store,
// not from their events, so resyncing buys nothing but CPU. Default: 0 (never).
func WithResync(d time.Duration) Option {
	return func(b *Backend) error {
		if d < 0 {
			return fmt.Errorf("kube: negative resync period %v", d)
		}
		b.resync = d
		return nil
	}
}

// WithPollInterval bounds how long a wait goes without re-reading state when no
// informer event arrives. Default: DefaultPollInterval.
func WithPollInterval(d time.Duration) Option {
	return func(b *Backend) error {
		if d <= 0 {
			return fmt.Errorf("kube: poll interval %v: must be positive", d)
		}
		b.poll = d
		return nil
	}
}

// WithClock sets the clock used for waits and for log lines without a timestamp, so
// tests control time. Default: the real clock.
func WithClock(c clock.WithTicker) Option {
	return func(b *Backend) error {
		b.clock = c
		return nil
	}
}

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(b *Backend) error {
		b.logger = l
		return nil
	}
}

// New returns a Backend using client. It contacts nothing: namespaces are created by
// Launch and the informers start on first use.
func New(client kubernetes.Interface, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, errors.New("kube: nil client")
	}
	b := &Backend{
		client:           client,
		createNamespaces: true,
		port:             DefaultRendezvousPort,
		sshPath:          DefaultSSHAuthMountPath,
		shmSize:          DefaultShmSize.DeepCopy(),
		grace:            DefaultStopGracePeriod,
		clock:            clock.RealClock{},
		logger:           slog.Default(),
		poll:             DefaultPollInterval,
		logLimiter:       flowcontrol.NewTokenBucketPassiveRateLimiter(DefaultLogRequestQPS, DefaultLogRequestBurst),
		launchSlots:      make(chan struct{}, DefaultLaunchConcurrency),
		transient:        transientConfig{imagePullGrace: DefaultImagePullGrace, nodeLostGrace: DefaultNodeLostGrace},
		gangs:            map[string]*gangLock{},
		stopped:          map[string]bool{},
		namespaces:       map[string]bool{},
	}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	if err := b.checkBatchScheduling(); err != nil {
		return nil, err
	}
	if b.Namespaced() {
		b.createNamespaces = false
	}
	b.cache = newPodCache(client, b.resync, b.watchedNamespaces())
	b.nodes = newNodeCache(client, b.resync, b.cache.notify)
	b.nodes.clock = b.clock
	return b, nil
}

// Name returns "kubernetes".
func (b *Backend) Name() string { return "kubernetes" }

// Close stops the informers. The Backend must not be used afterwards.
func (b *Backend) Close() error {
	b.cache.close()
	b.nodes.close()
	return nil
}

// InCluster is the RESTConfig path that selects the in-cluster configuration.
const InCluster = "in-cluster"

// DefaultServiceAccountDir is where Kubernetes mounts a pod's service account token
// (token) and the cluster's CA certificate (ca.crt).
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// EnvServiceAccountDir is the environment variable that, when set, names the directory
// the in-cluster configuration reads token and ca.crt from instead of DefaultServiceAccountDir (tests, and pods that
// mount a projected token elsewhere).
const EnvServiceAccountDir = "DLC_KUBE_SERVICE_ACCOUNT_DIR"

// RESTConfig returns the configuration to reach a cluster: the kubeconfig file at path;
// InCluster for the pod's service account (InClusterConfig); or, when path is empty, the
// in-cluster configuration if the process runs in a pod, else the usual kubeconfig
// search ($KUBECONFIG, ~/.kube/config). Its rate limits are raised from client-go's 5
// requests a second, which would take 13s to create a 64-pod gang.
func RESTConfig(kubeconfigPath string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	inPod := os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
	if kubeconfigPath == InCluster || (kubeconfigPath == "" && inPod) {
		dir := os.Getenv(EnvServiceAccountDir)
		if dir == "" {
			dir = DefaultServiceAccountDir
		}
		cfg, err = InClusterConfig(dir)
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfigPath
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kube: client config: %w", err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = DefaultClientQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultClientBurst
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "opendlc-worker"
	}
	return cfg, nil
}

// DefaultClientQPS and DefaultClientBurst are the worker's client-side rate limit to
// the API server when its configuration sets none (RESTConfig): requests a second, and
// how many may go at once after a quiet spell. dlc worker --kube-qps and --kube-burst
// raise them for a worker that runs thousands of pods (docs/production.md).
const (
	DefaultClientQPS   = 50
	DefaultClientBurst = 100
)

// InClusterConfig is the configuration of a process in a pod, as client-go's
// rest.InClusterConfig but reading the service account's token and CA certificate from
// dir: the API server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT over HTTPS,
// authenticated by dir/token (re-read as the kubelet rotates it), verified against
// dir/ca.crt.
func InClusterConfig(dir string) (*rest.Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("kube: in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset (not running in a pod?)")
	}
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("kube: in-cluster configuration: service account token: %w", err)
	}
	if _, err := os.Stat(caFile); err != nil {
		return nil, fmt.Errorf("kube: in-cluster configuration: cluster CA: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		BearerToken:     string(token),
		BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
	}, nil
}

// lockGang returns gang id's lock, held. It retries when Cleanup dropped the lock while
// we waited for it, so two holders never hold different locks for one gang.
func (b *Backend) lockGang(id string) *gangLock {
	for {
		b.mu.Lock()
		l := b.gangs[id]
		if l == nil {
			l = &gangLock{}
			b.gangs[id] = l
		}
		b.mu.Unlock()
		l.Lock()
		b.mu.Lock()
		current := b.gangs[id] == l
		b.mu.Unlock()
		if current {
			return l
		}
		l.Unlock()
	}
}

// forgetGang drops gang id's in-memory state; call with its lock held.
func (b *Backend) forgetGang(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.gangs, id)
	delete(b.stopped, id)
}

func (b *Backend) markStopped(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped[id] = true
}

func (b *Backend) stoppedHere(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped[id]
}

func ptr[T any](v T) *T { return new(v) }
