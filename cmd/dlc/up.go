package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
)

// upOptions are `dlc up`'s: its flags, bound to an embedded.Config and the few that
// are not one of its fields; Complete turns those into the Config, Validate checks it,
// Run starts the stack and serves until the context ends.
type upOptions struct {
	opts                    embedded.Config
	verbose                 bool
	ret                     retentionFlags
	pools                   poolFlags
	grace                   graceFlags
	sandbox, trustLocalJobs bool
	// localJobs is the banner's line on how local jobs run (localTenancy).
	localJobs string
}

func newUpCmd() *cobra.Command {
	o := &upOptions{}
	opts := &o.opts
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole stack on loopback in the foreground: Temporal, NATS, S3, worker and API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Dir, "dir", embedded.DefaultDir(), "state directory")
	f.StringVar(&opts.APIAddr, "addr", embedded.DefaultAPIAddr, "API listen address")
	f.BoolVar(&opts.UI, "ui", false, "serve the Temporal Web UI (the dev server's: needs --temporal-tls=false)")
	f.BoolVar(&opts.TemporalTLS, "temporal-tls", true, "require mutual TLS of Temporal's clients, with a CA and certificates generated into DIR/temporal/tls (the stack's processes get the client certificate); false runs the dev server, which any local process can reach")
	f.StringVar(&opts.WorkDir, "workdir", "", "base directory of local replicas (default: the current directory)")
	f.IntVar(&opts.GPUs, "gpus", 0, "local backend: simulate an inventory of N GPUs (CUDA_VISIBLE_DEVICES 0..N-1) instead of the ones nvidia-smi -L lists")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "run jobs as pods on this cluster (\"in-cluster\" for the pod's service account) instead of local processes")
	f.StringVar(&opts.PodS3Endpoint, "pod-s3-endpoint", "", "with --kubeconfig: "+podS3EndpointUsage+" (default: the stack's S3 endpoint, see --s3-addr)")
	f.StringVar(&opts.S3Addr, "s3-addr", "127.0.0.1:0", "the S3 gateway's listen address (port 0: a free one); listening beyond loopback exposes its development account")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log at info level")
	f.StringVar(&opts.AdminTokenFile, "admin-token-file", "", "the admin token's file, generated on first start (default DIR/"+auth.AdminTokenFile+", where the CLI looks)")
	f.StringVar(&opts.TLSCertFile, "tls-cert", "", "serve the API over HTTPS with this PEM certificate (chain)")
	f.StringVar(&opts.TLSKeyFile, "tls-key", "", "the PEM key of --tls-cert")
	f.StringVar(&opts.S3EventsWorkspace, "s3-events-workspace", "default", "the workspace whose triggers receive the S3 gateway's notifications of objects outside every workspace's storage location (on dlc.WORKSPACE.s3.events); an object in a workspace's location is announced to that workspace only")
	f.BoolVar(&opts.StorageIsolation, "storage-isolation", true, "confine each workspace to its own S3 location (--storage-root/WORKSPACE/, or its registry entry's storage.locations) and give its replicas their own gateway account")
	f.StringVar(&opts.StorageRoot, "storage-root", embedded.DefaultStorageRoot, "with --storage-isolation: the root of the workspaces' default S3 locations")
	f.DurationVar(&opts.LogArchiveRetention, "log-archive-retention", 0, logArchiveRetentionUsage)
	f.StringVar(&opts.RunsDatabase, "runs-database", "", "keep run records (history, lineage, usage) in this database: postgres://USER@HOST/DB "+
		"or sqlite:PATH; none keeps no records (default: SQLite in DIR/runs.db)")
	f.DurationVar(&opts.RunsRetention, "runs-retention", 0, runsRetentionUsage)
	f.BoolVar(&opts.NATSTLS, "nats-tls", false, "serve NATS over TLS only, with a CA generated into DIR/nats/tls (clients trust DIR/nats/tls/ca.pem)")
	registerMetricsAddr(f, &opts.MetricsAddr, os.Getenv("DLC_METRICS_ADDR"))
	f.StringVar(&opts.ConsoleURL, "console-url", "", "the web console's external base URL (https://dlc.example.com), which notification messages and e-mails link to; default: no links")
	registerResourceInterval(f, &opts.ResourceInterval)
	f.StringVar(&opts.SecretsDir, "secrets-dir", "", "read the secrets that trigger webhooks and notification rules name by reference (secretRef, botSecretRef, passwordRef) from this directory: one file WORKSPACE.NAME, or WORKSPACE.NAME.KEY for a reference with a key (default DIR/secrets)")
	f.StringSliceVar(&opts.WebhookAllow, "webhook-allow", nil, "let notification webhooks reach these internal destinations: CIDR, IP address or host:port (repeatable, comma-separated); loopback, private, link-local, multicast and unspecified addresses are refused otherwise")
	f.BoolVar(&o.sandbox, "local-sandbox", true, "run local replicas in the sandbox where the host allows it (root, bubblewrap): each workspace's replicas as a user of their own, with no view of the state directory and no route to the stack's servers; without it the stack is single-tenant")
	f.BoolVar(&o.trustLocalJobs, "trust-local-jobs", false, "give tokens to workspaces other than default even though local jobs run without the sandbox, where any member's job can read the admin token")
	o.ret.register(f)
	o.pools.register(f, "with --kubeconfig: ", "")
	o.grace.register(f)
	return cmd
}

// Validate refuses flags that cannot go together, naming them.
func (o *upOptions) Validate() error {
	if o.opts.GPUs < 0 {
		return fmt.Errorf("--gpus: %d is negative; want the number of GPUs to simulate", o.opts.GPUs)
	}
	if o.opts.UI && o.opts.TemporalTLS {
		return errors.New("--ui: the Temporal Web UI is the dev server's, which has no TLS; it needs --temporal-tls=false, which lets any local process reach Temporal")
	}
	return checkPodS3Endpoint(o.opts.PodS3Endpoint, o.opts.Kubeconfig)
}

// Complete fills in the Config's logger, retention, pools, grace periods and tenancy.
func (o *upOptions) Complete() error {
	o.opts.Logger = newLogger(o.verbose)
	o.opts.Streams = o.ret.options()
	poolOpts, err := o.pools.options()
	if err != nil {
		return err
	}
	o.opts.KubeOptions = append(append(o.opts.KubeOptions, poolOpts...), o.grace.options()...)
	o.localJobs = localTenancy(&o.opts, o.sandbox, o.trustLocalJobs)
	return nil
}

// Run starts the stack, prints the banner and serves until ctx ends or the stack fails.
func (o *upOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	fmt.Fprintln(stderr, "starting OpenDLC (the first start builds the Temporal and S3 servers from source: a few minutes)...")
	e, err := embedded.Start(withBuildProgress(ctx, stderr), o.opts)
	if err != nil {
		return err
	}
	defer e.Close()
	printBanner(stdout, e, o.localJobs)
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "shutting down...")
		return nil
	case err := <-e.Err():
		return err
	}
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

func (r *retentionFlags) register(f *pflag.FlagSet) {
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
	if tf := s.Temporal.TLS; tf != nil {
		fmt.Fprintf(w, "  Temporal     %s (namespace %s; mutual TLS: CA %s, client certificate %s and key %s)\n",
			s.Temporal.Address, s.Temporal.Namespace, tf.CAFile, tf.CertFile, tf.KeyFile)
	} else {
		fmt.Fprintf(w, "  Temporal     %s (namespace %s; no TLS: any local process can reach it)\n", s.Temporal.Address, s.Temporal.Namespace)
	}
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
