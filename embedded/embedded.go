// Package embedded runs the whole of OpenDLC in one process on loopback: the Temporal dev
// server, NATS JetStream, an S3 gateway, a worker with the local backend, and the HTTP
// API. `dlc up` and `dlc run` use it, and so do the integration tests.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/api/server"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workers"
)

// DefaultAPIAddr is where `dlc up` serves the API and where the CLI looks for it.
const DefaultAPIAddr = "127.0.0.1:8480"

// DefaultBucket is created in the embedded S3 for checkpoints and artifacts.
const DefaultBucket = "dlc"

// Options configure Start.
type Options struct {
	// Dir holds all state (Temporal's SQLite file, the JetStream store, S3 objects,
	// local replicas' logs). Default DefaultDir().
	Dir string
	// APIAddr is the API's listen address; default DefaultAPIAddr. Use 127.0.0.1:0 for
	// a free port.
	APIAddr string
	// UI serves the Temporal Web UI.
	UI bool
	// WorkDir is the local backend's base directory for relative working dirs; default
	// the current directory.
	WorkDir string
	// Buckets to create besides DefaultBucket.
	Buckets []string
	// NoWorker starts everything but the worker (tests run workers of their own).
	NoWorker bool
	// Logger; default a text logger on stderr at warn level.
	Logger *slog.Logger
	// Interceptors are passed to the worker.
	Interceptors []interceptor.WorkerInterceptor
	// Kubeconfig, when set, makes the worker run jobs as pods on that cluster (the
	// kubernetes backend) instead of local processes. "in-cluster" uses the pod's
	// service account.
	Kubeconfig string
	// KubeOptions configure the kubernetes backend.
	KubeOptions []kube.Option
	// Streams set the event and log streams' retention, like an SLS logstore's TTL.
	Streams []jetstream.Option
	// AdminTokenFile holds the admin token (generated there, mode 0600, on first
	// start); default Dir/admin-token, where the CLI looks by default.
	AdminTokenFile string
	// TLSCertFile and TLSKeyFile, when set, serve the API over HTTPS.
	TLSCertFile, TLSKeyFile string
	// S3EventsWorkspace is the workspace whose S3 notification subject
	// (dlc.<workspace>.s3.events) the S3 gateway publishes every bucket's
	// notifications to, for triggers; default "default".
	S3EventsWorkspace string
}

// DefaultDir is the default state directory: $XDG_STATE_HOME/opendlc or
// ~/.local/state/opendlc.
func DefaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "opendlc")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "opendlc")
	}
	return filepath.Join(home, ".local", "state", "opendlc")
}

// Embedded is a running stack.
type Embedded struct {
	Stack  *devstack.Stack
	Worker *workers.Main
	// APIURL is the API's base URL, http://127.0.0.1:port (https with TLS).
	APIURL string
	// AdminToken is the admin token (workspace "*"), also kept in
	// Options.AdminTokenFile. Never print it.
	AdminToken string
	// AdminTokenFile is where AdminToken is kept.
	AdminTokenFile string
	// Auth is the token and workspace store.
	Auth *auth.Store
	// Dir is the state directory.
	Dir string

	opts     Options
	closers  []func() error
	notifier *notify.Dispatcher
	triggers *triggers.Dispatcher
	temporal client.Client
	events   *jetstream.Client
	http     *http.Server
	serveErr chan error
}

// Start starts every component and returns once the API answers.
func Start(ctx context.Context, opts Options) (_ *Embedded, err error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.APIAddr == "" {
		opts.APIAddr = DefaultAPIAddr
	}
	if opts.AdminTokenFile == "" {
		opts.AdminTokenFile = filepath.Join(opts.Dir, auth.AdminTokenFile)
	}
	tlsConfig, err := server.LoadTLS(opts.TLSCertFile, opts.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opts.WorkDir == "" {
		if opts.WorkDir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	// Listen first: a busy API port should fail before minutes of start-up.
	ln, err := net.Listen("tcp", opts.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("embedded: listen on %s: %w", opts.APIAddr, err)
	}
	e := &Embedded{Dir: opts.Dir, AdminTokenFile: opts.AdminTokenFile, opts: opts, serveErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			ln.Close()
			e.Close()
		}
	}()
	e.Stack, err = devstack.Start(ctx, devstack.Options{
		Dir:     opts.Dir,
		UI:      opts.UI,
		Buckets: append([]string{DefaultBucket}, opts.Buckets...),
		// Bucket notifications go to a workspace's S3 subject, which DLC_INBOUND keeps
		// for triggers.
		EventSubject: schemas.S3EventSubject(cmp.Or(opts.S3EventsWorkspace, schemas.DefaultWorkspace)),
	})
	if err != nil {
		return nil, err
	}
	if !opts.NoWorker {
		backend, err := e.backend()
		if err != nil {
			return nil, err
		}
		e.Worker, err = workers.Start(ctx, workers.Config{
			TemporalAddress: e.Stack.Temporal.Address,
			Namespace:       e.Stack.Temporal.Namespace,
			NATSURL:         e.Stack.NATS.URL,
			S3:              e.S3Config(),
			Backend:         backend,
			Logger:          opts.Logger,
			Interceptors:    opts.Interceptors,
			Streams:         opts.Streams,
		})
		if err != nil {
			return nil, err
		}
	}
	e.temporal, err = client.DialContext(ctx, client.Options{
		HostPort:  e.Stack.Temporal.Address,
		Namespace: e.Stack.Temporal.Namespace,
		Logger:    sdklog.NewStructuredLogger(opts.Logger),
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: dial temporal: %w", err)
	}
	e.events, err = jetstream.Connect(e.Stack.NATS.URL)
	if err != nil {
		return nil, err
	}
	if err := e.events.EnsureStreams(ctx, opts.Streams...); err != nil {
		return nil, err
	}
	js := e.events.JetStream()
	if err := notify.EnsureStreams(ctx, js); err != nil {
		return nil, err
	}
	rules, err := notify.OpenStore(ctx, js)
	if err != nil {
		return nil, err
	}
	if e.notifier, err = notify.StartDispatcher(ctx, js, notify.WithLogger(opts.Logger)); err != nil {
		return nil, err
	}
	if err := triggers.EnsureStreams(ctx, js); err != nil {
		return nil, err
	}
	triggerStore, err := triggers.OpenStore(ctx, js)
	if err != nil {
		return nil, err
	}
	if e.triggers, err = triggers.StartDispatcher(ctx, js, e.temporal, triggers.WithLogger(opts.Logger)); err != nil {
		return nil, err
	}
	if e.Auth, err = auth.OpenStore(ctx, js); err != nil {
		return nil, err
	}
	if e.AdminToken, err = auth.BootstrapFile(ctx, e.Auth, opts.AdminTokenFile); err != nil {
		return nil, err
	}
	api := server.New(e.temporal, e.events, server.WithNamespace(e.Stack.Temporal.Namespace),
		server.WithLogger(opts.Logger), server.WithRules(rules), server.WithAuth(e.Auth),
		server.WithTriggers(triggerStore))
	e.http = api.HTTPServer(tlsConfig)
	e.APIURL = "http://" + ln.Addr().String()
	if tlsConfig != nil {
		e.APIURL = "https://" + ln.Addr().String()
	}
	go func() { e.serveErr <- server.Serve(context.Background(), e.http, ln) }()
	return e, nil
}

// S3Config is how the control plane and replicas reach the embedded S3.
func (e *Embedded) S3Config() checkpoint.Config {
	s := e.Stack.S3
	return checkpoint.Config{Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey, PathStyle: true}
}

// ReplicaEnv is the S3 environment every replica gets, following the training-code
// contract (checkpoint.ConfigFromEnv reads it).
func (e *Embedded) ReplicaEnv() []schemas.EnvVar {
	s := e.Stack.S3
	return []schemas.EnvVar{
		{Name: "DLC_S3_ENDPOINT", Value: s.Endpoint},
		{Name: "AWS_REGION", Value: s.Region},
		{Name: "AWS_ACCESS_KEY_ID", Value: s.AccessKey},
		{Name: "AWS_SECRET_ACCESS_KEY", Value: s.SecretKey},
	}
}

// backend is the worker's backend: kubernetes when a kubeconfig is given, else local.
func (e *Embedded) backend() (backend.Backend, error) {
	if e.opts.Kubeconfig == "" {
		return e.LocalBackend()
	}
	path := e.opts.Kubeconfig
	if path == "in-cluster" {
		path = ""
	}
	kb, err := NewKubeBackend(path, e.opts.KubeOptions...)
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, kb.Close)
	return kb, nil
}

// NewKubeBackend returns a kubernetes backend for the cluster of a kubeconfig file (""
// for in-cluster configuration).
func NewKubeBackend(kubeconfig string, opts ...kube.Option) (*kube.Backend, error) {
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded: kubernetes client: %w", err)
	}
	return kube.New(cs, opts...)
}

// LocalBackend returns a local backend keeping its state under the stack's Dir.
func (e *Embedded) LocalBackend(opts ...local.Option) (backend.Backend, error) {
	return local.New(append([]local.Option{
		local.WithStateDir(filepath.Join(e.Dir, "local")),
		local.WithBaseDir(e.opts.WorkDir),
		local.WithEnv(e.ReplicaEnv()...),
	}, opts...)...)
}

// Err returns a channel that receives the API server's error if it stops serving.
func (e *Embedded) Err() <-chan error { return e.serveErr }

// Close stops the API, the worker and every server, in that order.
func (e *Embedded) Close() error {
	var errs []error
	if e.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.http.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if e.notifier != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.notifier.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if e.triggers != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.triggers.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if e.Worker != nil {
		e.Worker.Close()
	}
	for _, c := range e.closers {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Auth != nil {
		e.Auth.Close()
	}
	if e.events != nil {
		e.events.Close()
	}
	if e.temporal != nil {
		e.temporal.Close()
	}
	if e.Stack != nil {
		if err := e.Stack.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
