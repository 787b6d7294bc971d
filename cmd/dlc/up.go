package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
)

func newUpCmd() *cobra.Command {
	var opts embedded.Config
	var verbose bool
	var ret retentionFlags
	var pools poolFlags
	var grace graceFlags
	var sandbox, trustLocalJobs bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole stack on loopback in the foreground: Temporal, NATS, S3, worker and API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.GPUs < 0 {
				return fmt.Errorf("--gpus: %d is negative; want the number of GPUs to simulate", opts.GPUs)
			}
			if err := checkPodS3Endpoint(opts.PodS3Endpoint, opts.Kubeconfig); err != nil {
				return err
			}
			opts.Logger = newLogger(verbose)
			opts.Streams = ret.options()
			poolOpts, err := pools.options()
			if err != nil {
				return err
			}
			opts.KubeOptions = append(append(opts.KubeOptions, poolOpts...), grace.options()...)
			localJobs := localTenancy(&opts, sandbox, trustLocalJobs)
			fmt.Fprintln(cmd.ErrOrStderr(), "starting OpenDLC (the first start builds the Temporal and S3 servers from source: a few minutes)...")
			e, err := embedded.Start(withBuildProgress(cmd.Context(), cmd.ErrOrStderr()), opts)
			if err != nil {
				return err
			}
			defer e.Close()
			printBanner(cmd.OutOrStdout(), e, localJobs)
			select {
			case <-cmd.Context().Done():
				fmt.Fprintln(cmd.ErrOrStderr(), "shutting down...")
				return nil
			case err := <-e.Err():
				return err
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Dir, "dir", embedded.DefaultDir(), "state directory")
	f.StringVar(&opts.APIAddr, "addr", embedded.DefaultAPIAddr, "API listen address")
	f.BoolVar(&opts.UI, "ui", true, "serve the Temporal Web UI")
	f.StringVar(&opts.WorkDir, "workdir", "", "base directory of local replicas (default: the current directory)")
	f.IntVar(&opts.GPUs, "gpus", 0, "local backend: simulate an inventory of N GPUs (CUDA_VISIBLE_DEVICES 0..N-1) instead of the ones nvidia-smi -L lists")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "run jobs as pods on this cluster (\"in-cluster\" for the pod's service account) instead of local processes")
	f.StringVar(&opts.PodS3Endpoint, "pod-s3-endpoint", "", "with --kubeconfig: "+podS3EndpointUsage+" (default: the stack's S3 endpoint, see --s3-addr)")
	f.StringVar(&opts.S3Addr, "s3-addr", "127.0.0.1:0", "the S3 gateway's listen address (port 0: a free one); listening beyond loopback exposes its development account")
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	f.StringVar(&opts.AdminTokenFile, "admin-token-file", "", "the admin token's file, generated on first start (default DIR/"+auth.AdminTokenFile+", where the CLI looks)")
	f.StringVar(&opts.TLSCertFile, "tls-cert", "", "serve the API over HTTPS with this PEM certificate (chain)")
	f.StringVar(&opts.TLSKeyFile, "tls-key", "", "the PEM key of --tls-cert")
	f.StringVar(&opts.S3EventsWorkspace, "s3-events-workspace", "default", "the workspace whose triggers receive the S3 gateway's notifications of objects outside every workspace's storage location (on dlc.WORKSPACE.s3.events); an object in a workspace's location is announced to that workspace only")
	f.BoolVar(&opts.StorageIsolation, "storage-isolation", true, "confine each workspace to its own S3 location (--storage-root/WORKSPACE/, or its registry entry's storage.locations) and give its replicas their own gateway account")
	f.StringVar(&opts.StorageRoot, "storage-root", embedded.DefaultStorageRoot, "with --storage-isolation: the root of the workspaces' default S3 locations")
	f.DurationVar(&opts.LogArchiveRetention, "log-archive-retention", 0, logArchiveRetentionUsage)
	f.BoolVar(&opts.NATSTLS, "nats-tls", false, "serve NATS over TLS only, with a CA generated into DIR/nats/tls (clients trust DIR/nats/tls/ca.pem)")
	registerMetricsAddr(cmd, &opts.MetricsAddr)
	f.StringSliceVar(&opts.WebhookAllow, "webhook-allow", nil, "let notification webhooks reach these internal destinations: CIDR, IP address or host:port (repeatable, comma-separated); loopback, private, link-local, multicast and unspecified addresses are refused otherwise")
	f.BoolVar(&sandbox, "local-sandbox", true, "run local replicas in the sandbox where the host allows it (root, bubblewrap): each workspace's replicas as a user of their own, with no view of the state directory and no route to the stack's servers; without it the stack is single-tenant")
	f.BoolVar(&trustLocalJobs, "trust-local-jobs", false, "give tokens to workspaces other than default even though local jobs run without the sandbox, where any member's job can read the admin token")
	ret.register(cmd)
	pools.register(cmd, "with --kubeconfig: ", "")
	grace.register(cmd)
	return cmd
}

// localTenancy decides whether the local backend's replicas run in the sandbox
// (opts.Sandbox: asked for and available) and, when they do not, makes the stack
// single-tenant (opts.SingleTenant) unless trust is given. It returns the banner's
// line on local jobs; "" with --kubeconfig, whose pods are not local processes.
func localTenancy(opts *embedded.Config, sandbox, trust bool) string {
	if opts.Kubeconfig != "" {
		return ""
	}
	why := "--local-sandbox=false"
	if sandbox {
		err := local.SandboxAvailable()
		if err == nil {
			opts.Sandbox = true
			return "sandboxed: each workspace's replicas run as a user of their own, see only the S3 gateway and their gang (docs/security.md#local-jobs)"
		}
		why = err.Error()
	}
	if trust {
		return "NOT sandboxed (" + why + "); --trust-local-jobs: every workspace's jobs can read the stack's secrets, the admin token included"
	}
	opts.SingleTenant = "local jobs run without the sandbox (" + why + ") and can read its secrets"
	return "NOT sandboxed (" + why + "): single-tenant, tokens only for admins and workspace default (--trust-local-jobs to lift)"
}

// retentionFlags set the streams' retention, like an SLS logstore's TTL and quota.
type retentionFlags struct {
	eventAge, logAge     time.Duration
	eventBytes, logBytes int64
	logPerSubject        int64
}

func (r *retentionFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&r.eventAge, "event-max-age", 30*24*time.Hour, "keep status and metric events this long")
	f.Int64Var(&r.eventBytes, "event-max-bytes", 1<<30, "bound the event stream's size")
	f.DurationVar(&r.logAge, "log-max-age", 7*24*time.Hour, "keep log lines this long")
	f.Int64Var(&r.logBytes, "log-max-bytes", 4<<30, "bound the log stream's size")
	f.Int64Var(&r.logPerSubject, "log-max-lines-per-replica", 0, "keep at most this many lines per replica (0: no limit)")
}

func (r *retentionFlags) options() []jetstream.Option {
	return []jetstream.Option{
		jetstream.WithEventRetention(jetstream.Retention{MaxAge: r.eventAge, MaxBytes: r.eventBytes, Duplicates: time.Hour}),
		jetstream.WithLogRetention(jetstream.Retention{MaxAge: r.logAge, MaxBytes: r.logBytes, MaxMsgsPerSubject: r.logPerSubject, Duplicates: time.Hour}),
	}
}

// printBanner says where every part of the stack is; localJobs is the line on how
// local jobs run ("" for none).
func printBanner(w io.Writer, e *embedded.Embedded, localJobs string) {
	s := e.Stack
	fmt.Fprintf(w, "OpenDLC is up.\n")
	fmt.Fprintf(w, "  API          %s\n", e.APIURL)
	fmt.Fprintf(w, "  Console      %s/ui/ (sign in with a token)\n", e.APIURL)
	fmt.Fprintf(w, "  Temporal     %s (namespace %s)\n", s.Temporal.Address, s.Temporal.Namespace)
	if s.Temporal.UIAddress != "" {
		fmt.Fprintf(w, "  Temporal UI  http://%s\n", s.Temporal.UIAddress)
	}
	fmt.Fprintf(w, "  NATS         %s (no anonymous access: the stack's passwords in %s; workspace readers log in as WORKSPACE with an API token as password)\n",
		s.NATS.URL, filepath.Join(e.Dir, "nats", devstack.NATSUsersFile))
	if s.NATS.CAFile != "" {
		fmt.Fprintf(w, "  NATS CA      %s\n", s.NATS.CAFile)
	}
	fmt.Fprintf(w, "  S3           %s (bucket %s; the root account's keys, generated for this installation, in %s)\n",
		s.S3.Endpoint, embedded.DefaultBucket, s.S3.KeysFile)
	if e.Process.MetricsURL != "" {
		fmt.Fprintf(w, "  Metrics      %s\n", e.Process.MetricsURL)
	}
	fmt.Fprintf(w, "  State        %s\n", e.Dir)
	fmt.Fprintf(w, "  Admin token  in %s (the CLI reads it from the default state directory; else --token or DLC_TOKEN)\n", e.AdminTokenFile)
	if e.PodS3Endpoint != "" {
		printPodS3(w, e)
	}
	if localJobs != "" {
		fmt.Fprintf(w, "  Local jobs   %s\n", localJobs)
	}
	fmt.Fprintf(w, "Submit a job:  dlc run -f examples/trainer/job.yaml    (Ctrl-C stops the stack)\n")
}

func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// componentFlags are the addresses of separately running components.
type componentFlags struct {
	temporal  string
	namespace string
	nats      string
	natsCreds string
	natsCA    string
	// Client certificate and key for NATS over mutual TLS.
	natsCert, natsKey string
	// Temporal over TLS: a client certificate and key (mTLS), the CA of the server's
	// certificate, and the name to verify it against.
	temporalCert, temporalKey, temporalCA, temporalServerName string
	// storageRoot is app.Config.StorageRoot.
	storageRoot string
	// streamReplicas is --nats-stream-replicas (replicasflag.go).
	streamReplicas int
	// logArchive is app.Config.LogArchive's root and retention.
	logArchive app.LogArchiveConfig
}

// natsOptions turns the NATS flags and environment into connection options: a
// credentials file, or user and password from DLC_NATS_USER and DLC_NATS_PASSWORD (never
// from flags, which other users can read in the process list), and a CA for TLS.
func (c *componentFlags) natsOptions() []nats.Option {
	var opts []nats.Option
	if c.natsCreds != "" {
		opts = append(opts, nats.UserCredentials(c.natsCreds))
	}
	if u := os.Getenv("DLC_NATS_USER"); u != "" {
		opts = append(opts, nats.UserInfo(u, os.Getenv("DLC_NATS_PASSWORD")))
	}
	if c.natsCA != "" {
		opts = append(opts, nats.RootCAs(c.natsCA))
	}
	if c.natsCert != "" || c.natsKey != "" {
		opts = append(opts, nats.ClientCert(c.natsCert, c.natsKey))
	}
	return opts
}

// temporalTLS is the TLS configuration of the Temporal connection; nil (plain text)
// when no TLS flag is set.
func (c *componentFlags) temporalTLS() (*tls.Config, error) {
	if c.temporalCert == "" && c.temporalKey == "" && c.temporalCA == "" && c.temporalServerName == "" {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: c.temporalServerName, MinVersion: tls.VersionTLS12}
	if (c.temporalCert == "") != (c.temporalKey == "") {
		return nil, errors.New("--temporal-tls-cert and --temporal-tls-key go together")
	}
	if c.temporalCert != "" {
		cert, err := tls.LoadX509KeyPair(c.temporalCert, c.temporalKey)
		if err != nil {
			return nil, fmt.Errorf("temporal client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if c.temporalCA != "" {
		pem, err := os.ReadFile(c.temporalCA)
		if err != nil {
			return nil, fmt.Errorf("temporal CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal CA: %s holds no PEM certificate", c.temporalCA)
		}
	}
	return cfg, nil
}

// appConfig is a process's configuration with the flags' connections: Temporal's
// address, namespace and TLS, and NATS's URL, credentials and TLS.
func (c *componentFlags) appConfig(logger *slog.Logger) (app.Config, error) {
	temporalTLS, err := c.temporalTLS()
	if err != nil {
		return app.Config{}, err
	}
	streams, err := streamReplicasOption(c.streamReplicas)
	if err != nil {
		return app.Config{}, err
	}
	return app.Config{
		TemporalAddress: c.temporal, Namespace: c.namespace, TemporalTLS: temporalTLS,
		NATSURL: c.nats, NATSOptions: c.natsOptions(), Logger: logger,
		StorageRoot: c.storageRoot, Streams: streams, LogArchive: c.logArchive,
	}, nil
}

// envFrom is the variables of names that are set in the environment.
func envFrom(names ...string) []schemas.EnvVar {
	var env []schemas.EnvVar
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			env = append(env, schemas.EnvVar{Name: name, Value: v})
		}
	}
	return env
}

func (c *componentFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.temporal, "temporal", envOr("DLC_TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port")
	f.StringVar(&c.storageRoot, "storage-root", os.Getenv("DLC_STORAGE_ROOT"), storageRootUsage)
	f.StringVar(&c.logArchive.Root, "log-archive-root", os.Getenv("DLC_LOG_ARCHIVE_ROOT"), logArchiveRootUsage)
	f.DurationVar(&c.logArchive.Retention, "log-archive-retention", 0, logArchiveRetentionUsage)
	f.StringVar(&c.namespace, "namespace", envOr("DLC_TEMPORAL_NAMESPACE", "default"), "Temporal namespace")
	f.StringVar(&c.nats, "nats", envOr("DLC_NATS_URL", "nats://127.0.0.1:4222"), "NATS URL (a cluster's servers: comma-separated URLs)")
	registerStreamReplicas(cmd, &c.streamReplicas)
	f.StringVar(&c.natsCreds, "nats-creds", os.Getenv("DLC_NATS_CREDS"), "NATS credentials file (or DLC_NATS_USER / DLC_NATS_PASSWORD)")
	f.StringVar(&c.natsCA, "nats-tls-ca", os.Getenv("DLC_NATS_CA"), "CA certificate file for NATS over TLS")
	f.StringVar(&c.natsCA, "nats-ca", os.Getenv("DLC_NATS_CA"), "CA certificate file for NATS over TLS")
	_ = f.MarkDeprecated("nats-ca", "use --nats-tls-ca")
	f.StringVar(&c.natsCert, "nats-tls-cert", os.Getenv("DLC_NATS_TLS_CERT"), "client certificate for NATS over mutual TLS")
	f.StringVar(&c.natsKey, "nats-tls-key", os.Getenv("DLC_NATS_TLS_KEY"), "key of --nats-tls-cert")
	f.StringVar(&c.temporalCert, "temporal-tls-cert", os.Getenv("DLC_TEMPORAL_TLS_CERT"), "client certificate for Temporal over mutual TLS")
	f.StringVar(&c.temporalKey, "temporal-tls-key", os.Getenv("DLC_TEMPORAL_TLS_KEY"), "key of --temporal-tls-cert")
	f.StringVar(&c.temporalCA, "temporal-tls-ca", os.Getenv("DLC_TEMPORAL_TLS_CA"), "CA certificate of the Temporal frontend (default: the system's roots)")
	f.StringVar(&c.temporalServerName, "temporal-tls-server-name", os.Getenv("DLC_TEMPORAL_TLS_SERVER_NAME"), "name to verify the Temporal frontend's certificate against (default: the host of --temporal)")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newServerCmd() *cobra.Command {
	var c componentFlags
	var addr, adminTokenFile, tlsCert, tlsKey, metricsAddr string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run only the HTTP API, in front of an existing Temporal and NATS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := c.appConfig(newLogger(verbose))
			if err != nil {
				return err
			}
			cfg.API = &app.APIConfig{Addr: addr, TLSCertFile: tlsCert, TLSKeyFile: tlsKey, AdminTokenFile: adminTokenFile}
			cfg.Metrics = metricsConfig(metricsAddr)
			p, err := app.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			if adminTokenFile != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "admin token in %s\n", adminTokenFile)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "API listening on %s (web console at %s/ui/)\n", p.APIURL, p.APIURL)
			printMetricsURL(cmd.OutOrStdout(), p)
			return p.Wait(ctx)
		},
	}
	c.register(cmd)
	f := cmd.Flags()
	f.StringVar(&addr, "addr", embedded.DefaultAPIAddr, "listen address")
	f.StringVar(&adminTokenFile, "admin-token-file", os.Getenv("DLC_ADMIN_TOKEN_FILE"),
		"install the admin token kept in this file (generated there, mode 0600, if missing); tokens already created keep working without it")
	f.StringVar(&tlsCert, "tls-cert", os.Getenv("DLC_TLS_CERT"), "serve HTTPS with this PEM certificate (chain)")
	f.StringVar(&tlsKey, "tls-key", os.Getenv("DLC_TLS_KEY"), "the PEM key of --tls-cert")
	registerMetricsAddr(cmd, &metricsAddr)
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	return cmd
}

func newWorkerCmd() *cobra.Command {
	var c componentFlags
	var stateDir, workDir, kubeconfig, s3Secret, nsPrefix, podS3Endpoint string
	var podAnnotations, probeAnnotations map[string]string
	var probeImage, metricsAddr string
	var gpus int
	var pools poolFlags
	var batch batchFlags
	var pod podFlags
	var grace graceFlags
	var verbose bool
	var kubeNamespaces []string
	var heartbeatBudget float64
	var longHeartbeatTimeout time.Duration
	var launchConcurrency int
	var kubeClient kubeClientFlags
	healthChecks := true
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run only a worker, against an existing Temporal, NATS and S3",
		Long: "Run only a worker: local processes by default, pods with --kubeconfig.\n" +
			"S3 settings come from DLC_S3_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.\n" +
			"Local replicas receive them; pods receive the endpoint and region, and the credentials from\n" +
			"the Secret named by --s3-secret in their namespace; with --pod-s3-endpoint, all four from the\n" +
			"Secret " + kube.S3SecretName + " that the worker writes into each workspace namespace.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if gpus < 0 {
				return fmt.Errorf("--gpus: %d is negative; want the number of GPUs to simulate", gpus)
			}
			if err := checkLaunchConcurrency(launchConcurrency); err != nil {
				return err
			}
			if err := kubeClient.check(); err != nil {
				return err
			}
			if err := checkPodS3Endpoint(podS3Endpoint, kubeconfig); err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg, err := c.appConfig(newLogger(verbose))
			if err != nil {
				return err
			}
			cfg.Worker = true
			if err := checkHeartbeatBudget(heartbeatBudget); err != nil {
				return err
			}
			cfg.HeartbeatBudget = heartbeatBudget
			if err := checkLongHeartbeatTimeout(longHeartbeatTimeout); err != nil {
				return err
			}
			cfg.LongHeartbeatTimeout = longHeartbeatTimeout
			cfg.S3 = checkpoint.ConfigFromEnv()
			// The trigger dispatcher starts pipelines and jobs from inbound events; several
			// workers share its durable consumer.
			cfg.Triggers = true
			if kubeconfig != "" {
				cfg.Kubeconfig = kubeconfig
				cfg.KubeClient = app.KubeClientLimits{QPS: float32(kubeClient.qps), Burst: kubeClient.burst}
				opts := []kube.Option{kube.WithEnv(envFrom("DLC_S3_ENDPOINT", "AWS_REGION")...),
					kube.WithNamespacePrefix(nsPrefix), kube.WithPodAnnotations(podAnnotations)}
				poolOpts, err := pools.options()
				if err != nil {
					return err
				}
				opts = append(opts, poolOpts...)
				batchOpts, err := batch.options()
				if err != nil {
					return err
				}
				opts = append(opts, batchOpts...)
				opts = append(opts, kube.WithNamespaces(kubeNamespaces...), kube.WithHealthChecks(healthChecks),
					kube.WithLaunchConcurrency(launchConcurrency))
				if s3Secret != "" {
					opts = append(opts, kube.WithEnvFromSecret(s3Secret))
				}
				if podS3Endpoint != "" {
					opts = append(opts, kube.WithS3Credentials(workerS3Credentials(cfg.S3, podS3Endpoint)))
				}
				opts = append(opts, kube.WithHealthProbeAnnotations(probeAnnotations))
				if probeImage != "" {
					opts = append(opts, kube.WithHealthProbe(probeImage, kube.DefaultHealthProbeCommand...))
				}
				podOpts, err := pod.options()
				if err != nil {
					return err
				}
				cfg.KubeOptions = append(append(opts, podOpts...), grace.options()...)
			} else {
				cfg.LocalOptions = []local.Option{local.WithEnv(envFrom("DLC_S3_ENDPOINT", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")...)}
				if stateDir != "" {
					cfg.LocalOptions = append(cfg.LocalOptions, local.WithStateDir(stateDir))
				}
				if workDir != "" {
					cfg.LocalOptions = append(cfg.LocalOptions, local.WithBaseDir(workDir))
				}
				if gpus > 0 {
					cfg.LocalOptions = append(cfg.LocalOptions, local.WithGPUs(gpus))
				}
			}
			cfg.Metrics = metricsConfig(metricsAddr)
			p, err := app.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "worker started (%s backend)\n", p.Backend.Name())
			printMetricsURL(cmd.OutOrStdout(), p)
			return p.Wait(ctx)
		},
	}
	c.register(cmd)
	f := cmd.Flags()
	f.StringVar(&stateDir, "state-dir", "", "local backend state directory")
	f.StringVar(&workDir, "workdir", "", "base directory of local replicas")
	f.IntVar(&gpus, "gpus", 0, "local backend: simulate an inventory of N GPUs instead of the ones nvidia-smi -L lists (give every worker on a state directory the same)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "run jobs as pods on this cluster (\"in-cluster\" for the pod's service account)")
	f.StringVar(&s3Secret, "s3-secret", "", "kubernetes: Secret (in each workspace namespace) whose keys become the pods' environment")
	f.StringVar(&podS3Endpoint, "pod-s3-endpoint", "", "kubernetes: "+podS3EndpointUsage+" (default: none; pods get DLC_S3_ENDPOINT and AWS_REGION as they are here)")
	f.StringVar(&nsPrefix, "namespace-prefix", "", "kubernetes: a workspace W runs in namespace PREFIX+W")
	f.StringToStringVar(&podAnnotations, "pod-annotation", nil, "kubernetes: annotation KEY=VALUE on every pod (repeatable)")
	f.StringArrayVar(&kubeNamespaces, "kube-namespace", nil, "kubernetes: namespaced mode: run gangs only in this namespace, watch it alone, create none (repeatable; see deploy/rbac-namespaced.yaml)")
	f.BoolVar(&healthChecks, "health-checks", true, "kubernetes: node health checks (pre-flight checks, quarantine and re-checks; off, the worker needs no patch on nodes)")
	f.StringVar(&probeImage, "health-probe-image", "", "kubernetes: image of the node health check pods (default "+kube.DefaultHealthProbeImage+")")
	f.StringToStringVar(&probeAnnotations, "health-probe-annotation", nil, "kubernetes: annotation KEY=VALUE on every node health check pod (repeatable)")
	pools.register(cmd, "kubernetes: ", " (quota, public, spot, idle)")
	batch.register(cmd, "kubernetes: ")
	pod.register(cmd)
	grace.register(cmd)
	registerMetricsAddr(cmd, &metricsAddr)
	registerHeartbeatBudget(cmd, &heartbeatBudget)
	registerLongHeartbeatTimeout(cmd, &longHeartbeatTimeout)
	registerLaunchConcurrency(cmd, &launchConcurrency)
	kubeClient.register(cmd)
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	return cmd
}
