// Package app assembles one OpenDLC process from a Config: it connects to Temporal and
// NATS, declares every JetStream stream and bucket, and runs the parts the Config
// switches on — a worker (workflows and activities on the local or kubernetes
// backend), the notification dispatcher, the trigger dispatcher and the HTTP API.
// `dlc up` (through package embedded), `dlc server`, `dlc worker` and the integration
// tests all start their processes here, so each part is wired in one place.
//
// Processes take a Config struct; the libraries they assemble (backend/local,
// backend/kube, events/jetstream, notify, triggers, api/server) take functional
// options, which a Config carries where a process needs to pass them through.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/api/server"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/console"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/templates"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workers"
)

// InCluster as Config.Kubeconfig uses the pod's service account (see
// kube.InClusterConfig; kube.EnvServiceAccountDir moves where its files are read).
const InCluster = kube.InCluster

// Config is one process: what it connects to and which parts it runs. Every part is
// off unless switched on; the connections are made once and shared by the parts.
type Config struct {
	// TemporalAddress is host:port of the Temporal frontend. Required.
	TemporalAddress string
	// Namespace is the Temporal namespace; default "default".
	Namespace string
	// TemporalTLS, when set, connects to Temporal over TLS (mTLS with a client
	// certificate). Default: plain text.
	TemporalTLS *tls.Config
	// NATSURL is the NATS server URL. Required.
	NATSURL string
	// NATSOptions carry credentials and TLS settings (nats.UserCredentials,
	// nats.UserInfo, nats.RootCAs...). Default none.
	NATSOptions []nats.Option
	// Streams set the limits of the streams and buckets that Start declares
	// (jetstream.EnsureStreams). Default: jetstream's defaults.
	Streams []jetstream.Option
	// Logger; default slog.Default().
	Logger *slog.Logger

	// Worker runs the workflows and activities on the backend.
	Worker bool
	// Backend is the worker's backend. When nil, Start makes one: the kubernetes
	// backend when Kubeconfig is set, else the local one. Start closes the one it
	// makes, never one given here.
	Backend backend.Backend
	// Kubeconfig selects the kubernetes backend: a kubeconfig file, or InCluster.
	Kubeconfig string
	// KubeOptions configure the kubernetes backend.
	KubeOptions []kube.Option
	// KubeClient is the kubernetes backend's client-side rate limit to the API
	// server; a zero field keeps kube.DefaultClientQPS or kube.DefaultClientBurst.
	KubeClient KubeClientLimits
	// LocalOptions configure the local backend.
	LocalOptions []local.Option
	// S3 is how the worker reads checkpoints.
	S3 checkpoint.Config
	// StorageRoot, s3://bucket[/prefix], gives each workspace the default S3 location
	// StorageRoot/<workspace>/ (package storage): the API refuses documents naming
	// others, the worker refuses to launch them. "" restricts only workspaces whose
	// registry entry names locations.
	StorageRoot string
	// LogArchive configures the archive of finished jobs' logs in S3 (logarchive.go).
	LogArchive LogArchiveConfig
	// Runs is the run record database (runrecords.go); its zero value keeps none.
	Runs RunsConfig
	// TaskQueue the worker polls and the API and triggers start work on; default
	// workflows.TaskQueue.
	TaskQueue string
	// Interceptors wrap the worker's workflow and activity calls. Default none.
	Interceptors []interceptor.WorkerInterceptor
	// HeartbeatBudget is the heartbeats a second the worker's job-long activities
	// share (activities.JobActivities.HeartbeatBudget); default
	// activities.DefaultHeartbeatBudget.
	HeartbeatBudget float64
	// ResourceInterval is how often the worker samples each running replica's
	// resources (activities.JobActivities.ResourceInterval): 0, the default; negative,
	// never.
	ResourceInterval time.Duration
	// LongHeartbeatTimeout is how long a dead worker holds a running job's watch and
	// log forwarder (workers.Config.LongHeartbeatTimeout); 0: the default.
	LongHeartbeatTimeout time.Duration

	// Notifications runs the notification dispatcher (DLC_RULES to webhooks and
	// subjects).
	Notifications bool
	// WebhookAllow names the internal destinations (CIDRs, addresses, host:port) that
	// webhooks may reach; notify.ParseAllowList reads it. Default none.
	WebhookAllow []string
	// ConsoleURL is the web console's base URL that notifications link to
	// (notify.WithConsoleURL); empty: no links.
	ConsoleURL string
	// Secrets resolves the secrets documents name by reference: notification rules'
	// secretRef, botSecretRef and passwordRef (notify.WithSecrets) and triggers' webhook
	// secretRef (server.WithWebhookSecrets). Nil: none, and such a reference fails.
	Secrets notify.SecretSource
	// S3EventsWorkspace, with Triggers, routes the S3 notifications published on
	// schemas.S3RawEventSubject to the workspace whose storage location holds each
	// object, and those of objects no workspace holds to this workspace.
	S3EventsWorkspace string
	// S3EventsRoot is the root of the workspaces' default locations for that routing
	// when StorageRoot is empty.
	S3EventsRoot string
	// Triggers runs the trigger dispatcher (DLC_INBOUND to pipeline and job starts).
	// Several processes may run it: they share its durable consumer.
	Triggers bool

	// API serves the HTTP API when set.
	API *APIConfig
	// Metrics serves the process's metrics (/metrics, Prometheus text format) when set.
	// The metrics are recorded either way.
	Metrics *MetricsConfig
}

// APIConfig is the HTTP API of a process.
type APIConfig struct {
	// Listener is where the API is served. When nil, Start listens on Addr.
	Listener net.Listener
	// Addr is the listen address when Listener is nil.
	Addr string
	// TLSCertFile and TLSKeyFile, when set, serve HTTPS.
	TLSCertFile, TLSKeyFile string
	// AdminTokenFile, when set, installs the admin token kept in that file (generated
	// there, mode 0600, if missing).
	AdminTokenFile string
	// RateLimits bound failed authentication and anonymous audit records per client
	// address (server.RateLimits); the zero value takes the defaults.
	RateLimits server.RateLimits
	// NoConsole turns off the web console (package console), which is served under
	// /ui/ by default.
	NoConsole bool
	// SingleTenant, when set, says why the stack's jobs can read its secrets (the local
	// backend without its sandbox): tokens are then given to admins and the default
	// workspace only (auth.WithSingleTenant).
	SingleTenant string
}

// Process is a running process. Close stops it.
type Process struct {
	// Temporal and Events are the process's connections, shared by its parts.
	Temporal client.Client
	Events   *jetstream.Client
	// Backend is the worker's backend; nil without a worker.
	Backend backend.Backend
	// Auth is the token and workspace store; nil without the API.
	Auth *auth.Store
	// AdminToken is the admin token installed from APIConfig.AdminTokenFile. Never
	// print it.
	AdminToken string
	// APIURL is the API's base URL, http://host:port (https with TLS); "" without the
	// API.
	APIURL string
	// APIAddr is the address the API listens on.
	APIAddr net.Addr
	// Metrics is the process's metrics registry.
	Metrics *metrics.Registry
	// Runs is the run record database (Config.Runs); nil when none is configured or
	// the process runs neither a worker nor the API.
	Runs runs.Store
	// MetricsURL is where the metrics are served, http://host:port/metrics; "" when
	// they are not.
	MetricsURL string

	worker      *workers.Main
	notifier    *notify.Dispatcher
	triggers    *triggers.Dispatcher
	archive     *logarchive.Store // finished jobs' logs, read by the API
	http        *http.Server
	metricsHTTP *http.Server
	serveErr    chan error
	closers     []func() error
}

// Start connects, declares the streams and buckets, and starts the parts cfg switches
// on, in this order: worker, notification dispatcher, trigger dispatcher, API. It
// returns once every part runs (the API accepts connections). On error, whatever had
// started is stopped again, and APIConfig.Listener is closed. ctx bounds the start
// only.
func Start(ctx context.Context, cfg Config) (_ *Process, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, "default")
	p := &Process{serveErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			if cfg.API != nil && cfg.API.Listener != nil && p.http == nil {
				cfg.API.Listener.Close()
			}
			if cfg.Metrics != nil && cfg.Metrics.Listener != nil && p.metricsHTTP == nil {
				cfg.Metrics.Listener.Close()
			}
			p.Close()
		}
	}()
	if p.Metrics, err = metrics.New(); err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if cfg.API != nil {
		if tlsConfig, err = server.LoadTLS(cfg.API.TLSCertFile, cfg.API.TLSKeyFile); err != nil {
			return nil, err
		}
	}
	p.Temporal, err = client.DialContext(ctx, client.Options{
		HostPort:          cfg.TemporalAddress,
		Namespace:         cfg.Namespace,
		Logger:            newSDKLogger(cfg.Logger),
		ConnectionOptions: client.ConnectionOptions{TLS: cfg.TemporalTLS},
		MetricsHandler:    p.Metrics.TemporalHandler(),
	})
	if err != nil {
		return nil, fmt.Errorf("app: dial temporal %s: %w", cfg.TemporalAddress, err)
	}
	if p.Events, err = jetstream.Connect(cfg.NATSURL, cfg.NATSOptions...); err != nil {
		return nil, err
	}
	js := p.Events.JetStream()
	if err := jetstream.EnsureStreams(ctx, js, cfg.Streams...); err != nil {
		return nil, err
	}
	if err := p.openRuns(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg.Worker {
		if p.Backend, err = p.backend(cfg); err != nil {
			return nil, err
		}
		p.worker, err = workers.Start(ctx, workers.Config{
			Temporal: p.Temporal, Events: p.Events, TaskQueue: cfg.TaskQueue,
			S3: cfg.S3, StorageRoot: cfg.StorageRoot, LogArchiveRoot: cfg.LogArchive.Root, Backend: p.Backend, Logger: cfg.Logger, Interceptors: cfg.Interceptors,
			Metrics: p.Metrics, HeartbeatBudget: cfg.HeartbeatBudget, ResourceInterval: cfg.ResourceInterval, LongHeartbeatTimeout: cfg.LongHeartbeatTimeout,
			Runs: p.Runs,
		})
		if err != nil {
			return nil, err
		}
	}
	if cfg.Notifications {
		if p.notifier, err = notify.StartDispatcher(ctx, js, notify.WithLogger(cfg.Logger),
			notify.WithWebhookAllowList(cfg.WebhookAllow...), notify.WithMetrics(p.Metrics),
			notify.WithConsoleURL(cfg.ConsoleURL), notify.WithSecrets(cfg.Secrets)); err != nil {
			return nil, err
		}
	}
	// The one Service of the process, for every front end it runs.
	var svc *service.Service
	if cfg.Triggers || cfg.API != nil {
		if svc, err = p.compose(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Triggers {
		if p.triggers, err = triggers.StartDispatcher(ctx, js, svc, triggers.WithLogger(cfg.Logger)); err != nil {
			return nil, err
		}
		if cfg.S3EventsWorkspace != "" {
			registry, err := auth.OpenWorkspaceReader(ctx, js)
			if err != nil {
				return nil, fmt.Errorf("app: %w", err)
			}
			policy := &storage.Policy{Root: cmp.Or(cfg.StorageRoot, cfg.S3EventsRoot), Workspaces: registry}
			owner := triggers.OwnerByLocations(registry.Names, func(ctx context.Context, ws, uri string) (int, error) {
				locs, err := policy.Locations(ctx, ws)
				best := -1
				for _, l := range locs {
					if n := len(l.Bucket) + len(l.Prefix); l.Contains(uri) && n > best {
						best = n
					}
				}
				return best, err
			})
			router, err := triggers.StartS3Router(ctx, js, owner, cfg.S3EventsWorkspace, cfg.Logger)
			if err != nil {
				return nil, err
			}
			p.closers = append(p.closers, router.Close)
		}
	}
	if cfg.API != nil {
		// Workspace readers' JetStream requests (jetstream.ReaderAPIPrefix), checked and
		// forwarded with the server's identity.
		gate, err := jetstream.StartGate(p.Events.Conn(), cfg.Logger)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, gate.Close)
		if err := p.startAPI(cfg, svc, tlsConfig); err != nil {
			return nil, err
		}
	}
	if err := p.startMetrics(cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// compose builds the process's one Service (service.Compose), which every front end
// the process runs is handed: the trigger dispatcher, the API server and, through the
// API, the web console. So each starts what it starts with the same namespace, task
// queue and storage policy. With the API it opens the stores the API serves from
// (rules, triggers, tokens and workspaces, the log archive), and the storage policy
// reads workspaces from the token store; without (a worker's trigger dispatcher), it
// reads them from NATS.
func (p *Process) compose(ctx context.Context, cfg Config) (*service.Service, error) {
	js := p.Events.JetStream()
	sc := service.Config{Temporal: p.Temporal, Namespace: cfg.Namespace, TaskQueue: cfg.TaskQueue, Logger: cfg.Logger}
	// Pipeline templates are served by the API and run by the trigger dispatcher.
	templateStore, err := templates.OpenStore(ctx, js)
	if err != nil {
		return nil, err
	}
	sc.Templates = templateStore
	var registry storage.Registry
	if cfg.API != nil {
		rules, err := notify.OpenStore(ctx, js)
		if err != nil {
			return nil, err
		}
		if sc.Redriver, err = notify.OpenRedriver(ctx, js, rules); err != nil {
			return nil, err
		}
		triggerStore, err := triggers.OpenStore(ctx, js)
		if err != nil {
			return nil, err
		}
		var authOpts []auth.Option
		if cfg.API.SingleTenant != "" {
			authOpts = append(authOpts, auth.WithSingleTenant(cfg.API.SingleTenant))
		}
		if p.Auth, err = auth.OpenStore(ctx, js, authOpts...); err != nil {
			return nil, err
		}
		if cfg.API.AdminTokenFile != "" {
			if p.AdminToken, err = auth.BootstrapFile(ctx, p.Auth, cfg.API.AdminTokenFile); err != nil {
				return nil, err
			}
		}
		if p.archive, err = p.startLogArchive(cfg); err != nil {
			return nil, err
		}
		sc.Events, sc.Auth, sc.Rules, sc.Triggers, sc.LogArchive = p.Events, p.Auth, rules, triggerStore, p.archive
		sc.Runs = p.Runs
		registry = p.Auth
	} else {
		reader, err := auth.OpenWorkspaceReader(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		registry = reader
	}
	sc.Storage = &storage.Policy{Root: cfg.StorageRoot, Workspaces: registry}
	return service.Compose(ctx, sc), nil
}

// startAPI serves the API in front of svc.
func (p *Process) startAPI(cfg Config, svc *service.Service, tlsConfig *tls.Config) error {
	var err error
	ln := cfg.API.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.API.Addr); err != nil {
			return fmt.Errorf("app: listen on %s: %w", cfg.API.Addr, err)
		}
	}
	p.http = server.New(svc, p.Events, server.WithLogger(cfg.Logger), server.WithAuth(p.Auth),
		server.WithRateLimits(cfg.API.RateLimits), server.WithMetrics(p.Metrics), server.WithLogArchive(p.archive),
		server.WithWebhookSecrets(cfg.Secrets), server.WithRuns(p.Runs)).HTTPServer(tlsConfig)
	if !cfg.API.NoConsole {
		// The web console, under /ui/, calls the API handler in-process.
		p.http.Handler = console.Mount(p.http.Handler, console.Options{TLS: tlsConfig != nil, Logger: cfg.Logger})
	}
	p.APIAddr = ln.Addr()
	p.APIURL = "http://" + ln.Addr().String()
	if tlsConfig != nil {
		p.APIURL = "https://" + ln.Addr().String()
	}
	go func() { p.serveErr <- server.Serve(context.Background(), p.http, ln) }()
	return nil
}

// backend returns cfg.Backend, or makes the kubernetes or the local backend.
func (p *Process) backend(cfg Config) (backend.Backend, error) {
	if cfg.Backend != nil {
		return cfg.Backend, nil
	}
	if cfg.Kubeconfig == "" {
		return local.New(cfg.LocalOptions...)
	}
	kb, err := NewKubeBackend(cfg.Kubeconfig, cfg.KubeClient, cfg.KubeOptions...)
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, kb.Close)
	return kb, nil
}

// KubeClientLimits are a kubernetes backend's client-side rate limit to the API
// server; a zero field keeps kube.RESTConfig's default.
type KubeClientLimits struct {
	QPS   float32
	Burst int
}

// apply sets rc's rate limit to l's non-zero fields.
func (l KubeClientLimits) apply(rc *rest.Config) {
	if l.QPS > 0 {
		rc.QPS = l.QPS
	}
	if l.Burst > 0 {
		rc.Burst = l.Burst
	}
}

// NewKubeBackend returns a kubernetes backend for the cluster of a kubeconfig file
// (InCluster for the pod's service account; "" for the in-cluster configuration in a
// pod, else the default kubeconfig), with the client-side rate limit of limits.
func NewKubeBackend(kubeconfig string, limits KubeClientLimits, opts ...kube.Option) (*kube.Backend, error) {
	rc, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	limits.apply(rc)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("app: kubernetes client: %w", err)
	}
	// For the batch schedulers' PodGroups (custom resources); it contacts nothing
	// until a pool that hands gangs to one launches.
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("app: kubernetes dynamic client: %w", err)
	}
	return kube.New(cs, append([]kube.Option{kube.WithDynamicClient(dc)}, opts...)...)
}

// Err returns a channel that receives the API server's error if it stops serving (nil
// after Close). Without the API nothing is ever sent.
func (p *Process) Err() <-chan error { return p.serveErr }

// Wait blocks until ctx is done (and returns nil) or the API stops serving (and
// returns its error). It does not stop the process: Close does.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-p.serveErr:
		return err
	}
}

// Close stops the API, the dispatchers and the worker, in that order, then the backend
// Start made and the connections.
func (p *Process) Close() error {
	var errs []error
	// closeWithin gives stop five seconds and keeps its error.
	closeWithin := func(stop func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if p.http != nil {
		closeWithin(p.http.Shutdown)
	}
	if p.metricsHTTP != nil {
		closeWithin(p.metricsHTTP.Shutdown)
	}
	if p.notifier != nil {
		closeWithin(p.notifier.Close)
	}
	if p.triggers != nil {
		closeWithin(p.triggers.Close)
	}
	if p.worker != nil {
		p.worker.Close()
	}
	for _, c := range p.closers {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	if p.Auth != nil {
		p.Auth.Close()
	}
	if p.Events != nil {
		p.Events.Close()
	}
	if p.Temporal != nil {
		p.Temporal.Close()
	}
	closeWithin(p.Metrics.Close)
	return errors.Join(errs...)
}
