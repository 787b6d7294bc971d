// Package embedded runs the whole of OpenDLC in one process on loopback: the Temporal dev
// server (or, with Config.TemporalTLS, the Temporal server requiring mutual TLS), NATS
// JetStream and an S3 gateway (package devstack), and on them one app
// process with every part switched on — a worker with the local backend (or the
// kubernetes one), the notification and trigger dispatchers, and the HTTP API. `dlc up`
// and `dlc run` use it, and so do the integration tests.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/interceptor"

	"github.com/opendlc/opendlc/api/server"
	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// DefaultAPIAddr is where `dlc up` serves the API and where the CLI looks for it.
const DefaultAPIAddr = "127.0.0.1:8480"

// DefaultBucket is created in the embedded S3 for checkpoints and artifacts.
const DefaultBucket = "dlc"

// Config is an embedded stack.
type Config struct {
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
	// GPUs, when > 0, is a simulated GPU inventory for the local backend (device ids 0
	// to GPUs-1, local.WithGPUs); default (0) the GPUs nvidia-smi finds, if any.
	GPUs int
	// Buckets to create besides DefaultBucket.
	Buckets []string
	// NoWorker starts everything but the worker (tests run workers of their own).
	NoWorker bool
	// ResourceInterval is how often the worker samples each running replica's
	// resources (app.Config.ResourceInterval): 0, the default; negative, never.
	ResourceInterval time.Duration
	// NoNotifications runs no notification dispatcher: a `dlc notifier` of its own
	// does (one per NATS system).
	NoNotifications bool
	// Logger; default a text logger on stderr at warn level.
	Logger *slog.Logger
	// Interceptors are passed to the worker.
	Interceptors []interceptor.WorkerInterceptor
	// Kubeconfig, when set, makes the worker run jobs as pods on that cluster (the
	// kubernetes backend) instead of local processes. app.InCluster ("in-cluster") uses
	// the pod's service account.
	Kubeconfig string
	// KubeOptions configure the kubernetes backend.
	KubeOptions []kube.Option
	// PodS3Endpoint is the URL pods reach the stack's S3 at, with Kubeconfig: the
	// stack's own endpoint is on this host (loopback by default), which pods on the
	// cluster's nodes cannot reach. Default: the stack's endpoint (S3Addr's host and
	// port). See S3CredentialsFor.
	PodS3Endpoint string
	// S3Addr is the S3 gateway's listen address, host:port; default 127.0.0.1 and a
	// free port. Another host (or 0.0.0.0) lets pods reach it, and exposes the
	// development credentials' account to whoever can reach that address.
	S3Addr string
	// Streams set the event and log streams' retention, like an SLS logstore's TTL.
	Streams []jetstream.Option
	// AdminTokenFile holds the admin token (generated there, mode 0600, on first
	// start); default Dir/admin-token, where the CLI looks by default.
	AdminTokenFile string
	// TLSCertFile and TLSKeyFile, when set, serve the API over HTTPS.
	TLSCertFile, TLSKeyFile string
	// RateLimits bound failed authentication and anonymous audit records per client
	// address; default server.RateLimits' defaults.
	RateLimits server.RateLimits
	// S3EventsWorkspace is the workspace whose S3 notification subject
	// (dlc.<workspace>.s3.events) gets the S3 gateway's notifications of objects that no
	// workspace's storage location holds, for triggers; default "default". Those of an
	// object in a workspace's location go to that workspace's subject only.
	S3EventsWorkspace string
	// WebhookAllow names the internal destinations (CIDRs, addresses, host:port) that
	// notification webhooks may reach (app.Config.WebhookAllow). Default none.
	WebhookAllow []string
	// ConsoleURL is the web console's base URL that notifications link to
	// (app.Config.ConsoleURL); default: none.
	ConsoleURL string
	// SecretsDir holds the secrets that notification rules and trigger webhooks name
	// by reference (notify.DirSecrets: a file <workspace>.<name>[.<key>] each); default
	// Dir/secrets, created (mode 0700) at start.
	SecretsDir string
	// StorageIsolation confines each workspace to its own S3 locations (package
	// storage): StorageRoot/<workspace>/, or those of its registry entry. Documents
	// naming others are refused at submit and at launch, and replicas get the
	// workspace's own gateway account (created on first use, its secret derived from
	// the key in Dir/s3-accounts-key) instead of the root account. Default off.
	StorageIsolation bool
	// StorageRoot is the root of the default locations with StorageIsolation; default
	// DefaultStorageRoot.
	StorageRoot string
	// RunsDatabase is the run record database (app.RunsConfig.Database). Default: with
	// TemporalOnPostgres, the database opendlc_runs on the stack's PostgreSQL; else
	// SQLite in Dir/runs.db. "none" keeps no records.
	RunsDatabase string
	// RunsRetention is how long run records are kept (app.RunsConfig.Retention); zero
	// keeps them. RunsSweepEvery is the time between sweeps (default hourly).
	RunsRetention, RunsSweepEvery time.Duration
	// LogArchiveRetention is how long finished jobs' log archives are kept
	// (app.LogArchiveConfig.Retention); zero keeps them. The archives lie under each
	// workspace's location, or DefaultStorageRoot/<workspace>/ without StorageIsolation.
	LogArchiveRetention time.Duration
	// NATSTLS serves NATS over TLS, with a CA generated into Dir/nats/tls
	// (devstack.NATSOptions.TLS). NATS requires authentication either way.
	NATSTLS bool
	// MetricsAddr, when set, serves the process's metrics there (app.MetricsConfig).
	MetricsAddr string
	// TemporalOnPostgres runs the Temporal server on PostgreSQL instead of the dev
	// server (devstack.Options.TemporalOnPostgres); the benchmarks at scale use it.
	TemporalOnPostgres bool
	// TemporalTLS requires mutual TLS of every client of Temporal
	// (devstack.Options.TemporalTLS), with a CA, server and client certificates made
	// for this state directory in Dir/temporal/tls (Dir/temporal-server/tls with
	// TemporalOnPostgres): the stack's own processes get the client certificate
	// (AppConfig), and a process without it cannot connect. `dlc up` turns it on. UI
	// cannot be had with it (the Web UI is the dev server's, which has no TLS).
	TemporalTLS bool
	// Sandbox runs the local backend's replicas in its sandbox (local.WithSandbox):
	// each workspace's as a user of its own, with a minimal environment, no view of Dir
	// (nor of AdminTokenFile and TLSKeyFile) and no network but their gang's loopback
	// and the S3 gateway. Start fails where the host cannot give it
	// (local.SandboxAvailable). Use it with StorageIsolation, so that the S3 gateway
	// gives each workspace's replicas their own account rather than the root one.
	Sandbox bool
	// SingleTenant, when set, says why the local backend's jobs may read the stack's
	// secrets (no sandbox): the API then gives tokens to admins and the default
	// workspace only (app.APIConfig.SingleTenant).
	SingleTenant string
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
	Stack *devstack.Stack
	// Process is the app process running on Stack.
	Process *app.Process
	// APIURL is the API's base URL, http://127.0.0.1:port (https with TLS).
	APIURL string
	// AdminToken is the admin token (workspace "*"), also kept in
	// Config.AdminTokenFile. Never print it.
	AdminToken string
	// AdminTokenFile is where AdminToken is kept.
	AdminTokenFile string
	// Auth is the token and workspace store.
	Auth *auth.Store
	// Dir is the state directory.
	Dir string
	// PodS3Endpoint is the S3 endpoint pods are given (Config.PodS3Endpoint, or the
	// stack's own); "" without Config.Kubeconfig.
	PodS3Endpoint string
	// RunsDatabase is the DSN of the run record database (Config.RunsDatabase), which
	// a `dlc worker` of the stack is given too; "" when none is kept.
	RunsDatabase string

	// accounts and storageRoot are set with Config.StorageIsolation (storage.go).
	accounts    *storage.Accounts
	storageRoot string
	// sandbox is the local backend's sandbox with Config.Sandbox; nil without.
	sandbox *local.Sandbox
}

// Start starts the servers, then the app process on them, and returns once the API
// answers.
func Start(ctx context.Context, cfg Config) (_ *Embedded, err error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if cfg.APIAddr == "" {
		cfg.APIAddr = DefaultAPIAddr
	}
	if cfg.AdminTokenFile == "" {
		cfg.AdminTokenFile = filepath.Join(cfg.Dir, auth.AdminTokenFile)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.WorkDir == "" {
		if cfg.WorkDir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	// A bad TLS pair or a busy API port should fail before minutes of start-up.
	if _, err := server.LoadTLS(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
		return nil, err
	}
	s3Host, s3Port, err := splitS3Addr(cfg.S3Addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("embedded: listen on %s: %w", cfg.APIAddr, err)
	}
	e := &Embedded{Dir: cfg.Dir, AdminTokenFile: cfg.AdminTokenFile}
	defer func() {
		if err != nil {
			if e.Process == nil {
				ln.Close()
			}
			e.Close()
		}
	}()
	e.Stack, err = devstack.Start(ctx, devstack.Options{
		Dir:     cfg.Dir,
		UI:      cfg.UI,
		Buckets: append([]string{DefaultBucket}, cfg.Buckets...),
		S3Host:  s3Host,
		S3Port:  s3Port,
		S3IAM:   cfg.StorageIsolation,
		NATSTLS: cfg.NATSTLS,
		// The production server instead of the dev server, for the scale bench.
		TemporalOnPostgres: cfg.TemporalOnPostgres,
		TemporalTLS:        cfg.TemporalTLS,
		// Bucket notifications go to a subject no workspace reads, which DLC_INBOUND
		// keeps; the trigger process routes them to the owning workspace's S3 subject.
		EventSubject: schemas.S3RawEventSubject,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Kubeconfig != "" {
		e.PodS3Endpoint = cmp.Or(cfg.PodS3Endpoint, e.Stack.S3.Endpoint)
	}
	if e.RunsDatabase, err = e.runsDatabase(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg.StorageIsolation {
		if err := e.startStorage(cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Sandbox {
		if e.sandbox, err = e.sandboxOf(cfg); err != nil {
			return nil, err
		}
	}
	secretsDir := cmp.Or(cfg.SecretsDir, filepath.Join(cfg.Dir, "secrets"))
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: the secrets directory: %w", err)
	}
	e.Process, err = app.Start(ctx, e.AppConfig(app.Config{
		Logger:     cfg.Logger,
		Streams:    cfg.Streams,
		Worker:     !cfg.NoWorker,
		Kubeconfig: cfg.Kubeconfig,
		// Pods take S3 from their workspace's Secret (kube.WithS3Credentials).
		KubeOptions:      append([]kube.Option{kube.WithS3Credentials(e.S3CredentialsFor)}, cfg.KubeOptions...),
		LocalOptions:     localOptions(cfg),
		Interceptors:     cfg.Interceptors,
		Notifications:    !cfg.NoNotifications,
		ResourceInterval: cfg.ResourceInterval,
		WebhookAllow:     cfg.WebhookAllow,
		ConsoleURL:       cfg.ConsoleURL,
		Secrets:          notify.DirSecrets(secretsDir),
		Triggers:         true,
		// S3 notifications of objects no workspace's location holds; without storage
		// isolation a workspace's location is DefaultStorageRoot/<workspace>/.
		S3EventsWorkspace: cmp.Or(cfg.S3EventsWorkspace, schemas.DefaultWorkspace),
		S3EventsRoot:      cmp.Or(cfg.StorageRoot, DefaultStorageRoot),
		API: &app.APIConfig{Listener: ln, TLSCertFile: cfg.TLSCertFile, TLSKeyFile: cfg.TLSKeyFile,
			AdminTokenFile: cfg.AdminTokenFile, RateLimits: cfg.RateLimits, SingleTenant: cfg.SingleTenant},
		Metrics:    metricsConfig(cfg.MetricsAddr),
		LogArchive: app.LogArchiveConfig{Root: DefaultStorageRoot, Retention: cfg.LogArchiveRetention},
		Runs:       app.RunsConfig{Database: e.RunsDatabase, Retention: cfg.RunsRetention, SweepEvery: cfg.RunsSweepEvery},
	}))
	if err != nil {
		return nil, err
	}
	e.APIURL, e.AdminToken, e.Auth = e.Process.APIURL, e.Process.AdminToken, e.Process.Auth
	// Workspace readers log in to NATS with an API token of their workspace.
	e.Stack.NATS.SetAuthenticator(WorkspaceReaderAuthenticator(e.Auth))
	return e, nil
}

// metricsConfig serves the metrics on addr; nil (not served) when addr is "".
func metricsConfig(addr string) *app.MetricsConfig {
	if addr == "" {
		return nil
	}
	return &app.MetricsConfig{Addr: addr}
}

// localOptions are the local backend's options of cfg.
func localOptions(cfg Config) []local.Option {
	opts := []local.Option{local.WithBaseDir(cfg.WorkDir)}
	if cfg.GPUs > 0 {
		opts = append(opts, local.WithGPUs(cfg.GPUs))
	}
	return opts
}

// sandboxOf is the local backend's sandbox of cfg: replicas reach the S3 gateway and
// never see the state directory, the admin token's file or the API's TLS key.
func (e *Embedded) sandboxOf(cfg Config) (*local.Sandbox, error) {
	u, err := url.Parse(e.Stack.S3.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("embedded: sandbox: S3 endpoint: %w", err)
	}
	hide := []string{cfg.Dir, cfg.AdminTokenFile}
	if cfg.TLSKeyFile != "" {
		hide = append(hide, cfg.TLSKeyFile)
	}
	return &local.Sandbox{Forward: []string{u.Host}, Hide: hide}, nil
}

// Sandboxed reports whether the local backend's replicas run in its sandbox
// (Config.Sandbox).
func (e *Embedded) Sandboxed() bool { return e.sandbox != nil }

// AppConfig completes cfg for a process on the stack: Temporal, NATS and S3
// addresses, Temporal's client certificate (with Config.TemporalTLS), NATS credentials (the server's identity for a process with the API, else
// the worker's: devstack.NATSUserServer, NATSUserWorker) ahead of cfg.NATSOptions,
// and the local backend's state directory (Dir/local), replica environment
// (ReplicaEnv) and sandbox (Config.Sandbox), ahead of cfg.LocalOptions. Tests start
// extra processes (a second worker) with it.
func (e *Embedded) AppConfig(cfg app.Config) app.Config {
	cfg.TemporalAddress = e.Stack.Temporal.Address
	cfg.Namespace = e.Stack.Temporal.Namespace
	cfg.TemporalTLS = e.Stack.Temporal.TLSConfig()
	cfg.NATSURL = e.Stack.NATS.URL
	user := devstack.NATSUserWorker
	if cfg.API != nil {
		user = devstack.NATSUserServer
	}
	cfg.NATSOptions = append(e.Stack.NATS.ClientOptions(user), cfg.NATSOptions...)
	cfg.S3 = e.S3Config()
	base := []local.Option{
		local.WithStateDir(filepath.Join(e.Dir, "local")),
		local.WithEnv(e.ReplicaEnv()...),
	}
	if e.accounts != nil {
		cfg.StorageRoot = e.storageRoot
		base = append(base, local.WithWorkspaceEnv(e.WorkspaceS3Env))
	}
	if e.sandbox != nil {
		base = append(base, local.WithSandbox(*e.sandbox))
	}
	cfg.LocalOptions = append(base, cfg.LocalOptions...)
	return cfg
}

// S3Config is how the control plane and replicas reach the embedded S3.
func (e *Embedded) S3Config() checkpoint.Config {
	s := e.Stack.S3
	return checkpoint.Config{Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey, PathStyle: true}
}

// ReplicaEnv is the S3 environment every replica gets, following the training-code
// contract (checkpoint.ConfigFromEnv reads it). With Config.StorageIsolation it holds
// no credentials: each replica gets its workspace's (WorkspaceS3Env).
func (e *Embedded) ReplicaEnv() []schemas.EnvVar {
	s := e.Stack.S3
	env := []schemas.EnvVar{
		{Name: "DLC_S3_ENDPOINT", Value: s.Endpoint},
		{Name: "AWS_REGION", Value: s.Region},
	}
	if e.accounts != nil {
		return env
	}
	return append(env,
		schemas.EnvVar{Name: "AWS_ACCESS_KEY_ID", Value: s.AccessKey},
		schemas.EnvVar{Name: "AWS_SECRET_ACCESS_KEY", Value: s.SecretKey})
}

// S3CredentialsFor is how the pods of a workspace reach the stack's S3: PodS3Endpoint
// and, with Config.StorageIsolation, the workspace's own gateway account; without it,
// the gateway's root account, shared by every workspace. It is the one function that
// decides a workspace's credentials (kube.S3CredentialsFunc).
func (e *Embedded) S3CredentialsFor(ctx context.Context, workspace string) (kube.S3Credentials, error) {
	if e.accounts != nil {
		return e.workspaceS3Credentials(ctx, workspace)
	}
	s := e.Stack.S3
	return kube.S3Credentials{Endpoint: e.PodS3Endpoint, Region: s.Region, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
}

// splitS3Addr parses Config.S3Addr; "" is the defaults (loopback, a free port).
func splitS3Addr(addr string) (host string, port int, err error) {
	if addr == "" {
		return "", 0, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err == nil {
		port, err = strconv.Atoi(p)
	}
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("embedded: S3 address %q: want host:port", addr)
	}
	return h, port, nil
}

// Err returns a channel that receives the API server's error if it stops serving.
func (e *Embedded) Err() <-chan error { return e.Process.Err() }

// Close stops the process (API, dispatchers, worker) and then every server.
func (e *Embedded) Close() error {
	var errs []error
	if e.Process != nil {
		errs = append(errs, e.Process.Close())
	}
	if e.Stack != nil {
		errs = append(errs, e.Stack.Close())
	}
	return errors.Join(errs...)
}

// runsDatabase is the DSN of the stack's run record database (Config.RunsDatabase),
// creating the PostgreSQL database when it is the stack's.
func (e *Embedded) runsDatabase(ctx context.Context, cfg Config) (string, error) {
	switch {
	case cfg.RunsDatabase == "none":
		return "", nil
	case cfg.RunsDatabase != "":
		return cfg.RunsDatabase, nil
	case e.Stack.Postgres != nil:
		const name = "opendlc_runs"
		if err := e.Stack.Postgres.CreateDatabase(ctx, name); err != nil {
			return "", err
		}
		return e.Stack.Postgres.DSN(name), nil
	}
	return "sqlite:" + filepath.Join(e.Dir, "runs.db"), nil
}
