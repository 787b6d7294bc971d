package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/checkpoint"
)

// workerOptions are `dlc worker`'s: Complete merges the config file, the variables and
// the flags, Validate checks the result, Run runs the worker.
type workerOptions struct {
	configOptions
}

func newWorkerCmd() *cobra.Command {
	o := &workerOptions{configOptions{command: workerCommand}}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run only a worker, against an existing Temporal, NATS and S3",
		Long: "Run only a worker: local processes by default, pods with --kubeconfig.\n" +
			"S3 settings come from DLC_S3_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.\n" +
			"Local replicas receive them; pods receive the endpoint and region, and the credentials from\n" +
			"the Secret named by --s3-secret in their namespace; with --pod-s3-endpoint, all four from the\n" +
			"Secret " + kube.S3SecretName + " that the worker writes into each workspace namespace.\n" +
			"The configuration comes from --config (a YAML file, docs/configuration.md), the DLC_*\n" +
			"variables and the flags, each overriding the one before.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

// Run starts the worker, with the trigger dispatcher, and runs until ctx ends or the
// process fails.
func (o *workerOptions) Run(ctx context.Context, stdout io.Writer) error {
	cfg, err := o.appConfig()
	if err != nil {
		return err
	}
	p, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(stdout, "worker started (%s backend)\n", p.Backend.Name())
	printMetricsURL(stdout, p)
	return p.Wait(ctx)
}

// appConfig is the worker's process: the worker and the trigger dispatcher on the
// local or the kubernetes backend.
func (o *workerOptions) appConfig() (app.Config, error) {
	w := &o.Config.Worker
	cfg, err := o.Config.appConfig()
	if err != nil {
		return app.Config{}, err
	}
	cfg.Worker = true
	cfg.HeartbeatBudget = w.HeartbeatBudget
	cfg.ResourceInterval = time.Duration(w.ResourceInterval)
	cfg.LongHeartbeatTimeout = time.Duration(w.LongHeartbeatTimeout)
	cfg.S3 = checkpoint.ConfigFromEnv()
	// The trigger dispatcher starts pipelines and jobs from inbound events; several
	// workers share its durable consumer.
	cfg.Triggers = true
	k := &w.Kubernetes
	if k.Kubeconfig == "" {
		cfg.LocalOptions = []local.Option{local.WithEnv(envFrom("DLC_S3_ENDPOINT", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")...)}
		if w.Local.StateDir != "" {
			cfg.LocalOptions = append(cfg.LocalOptions, local.WithStateDir(w.Local.StateDir))
		}
		if w.Local.WorkDir != "" {
			cfg.LocalOptions = append(cfg.LocalOptions, local.WithBaseDir(w.Local.WorkDir))
		}
		if w.Local.GPUs > 0 {
			cfg.LocalOptions = append(cfg.LocalOptions, local.WithGPUs(w.Local.GPUs))
		}
		if w.Local.Sandbox {
			sb, err := o.sandbox(cfg.S3.Endpoint)
			if err != nil {
				return app.Config{}, err
			}
			cfg.LocalOptions = append(cfg.LocalOptions, local.WithSandbox(sb))
		}
		return cfg, nil
	}
	cfg.Kubeconfig = k.Kubeconfig
	cfg.KubeClient = app.KubeClientLimits{QPS: float32(k.Client.QPS), Burst: k.Client.Burst}
	opts := []kube.Option{kube.WithEnv(envFrom("DLC_S3_ENDPOINT", "AWS_REGION")...),
		kube.WithNamespacePrefix(k.NamespacePrefix), kube.WithPodAnnotations(k.PodAnnotations)}
	poolOpts, err := k.Pools.options()
	if err != nil {
		return app.Config{}, err
	}
	opts = append(opts, poolOpts...)
	batchOpts, err := k.Batch.options()
	if err != nil {
		return app.Config{}, err
	}
	opts = append(opts, batchOpts...)
	opts = append(opts, kube.WithNamespaces(k.Namespaces...), kube.WithHealthChecks(k.HealthChecks), kube.WithNodeStats(k.NodeStats), kube.WithDCGMExporter(k.DCGMExporterPort),
		kube.WithLaunchConcurrency(k.LaunchConcurrency))
	if k.S3Secret != "" {
		opts = append(opts, kube.WithEnvFromSecret(k.S3Secret))
	}
	if k.PodS3Endpoint != "" {
		opts = append(opts, kube.WithS3Credentials(workerS3Credentials(cfg.S3, k.PodS3Endpoint)))
	}
	opts = append(opts, kube.WithHealthProbeAnnotations(k.HealthProbe.Annotations))
	if k.HealthProbe.Image != "" {
		opts = append(opts, kube.WithHealthProbe(k.HealthProbe.Image, kube.DefaultHealthProbeCommand...))
	}
	podOpts, err := k.Pod.options()
	if err != nil {
		return app.Config{}, err
	}
	cfg.KubeOptions = append(append(opts, podOpts...), k.Grace.options()...)
	return cfg, nil
}

// sandbox is the local backend's sandbox of worker.local.sandbox, as embedded.sandboxOf
// makes `dlc up`'s: replicas reach the S3 endpoint they are given (s3Endpoint,
// DLC_S3_ENDPOINT), forwarded into each gang's network namespace, and nothing else; and
// never see a credential file the worker was given (NATS credentials and TLS
// certificate and key, Temporal's client certificate and key), its config file or its
// state directory. The forward needs a loopback IP: a remote endpoint is refused,
// naming the flag (or variable, or field) that asked for the sandbox.
func (o *workerOptions) sandbox(s3Endpoint string) (local.Sandbox, error) {
	c := &o.Config
	var sb local.Sandbox
	if s3Endpoint != "" {
		u, err := url.Parse(s3Endpoint)
		host := ""
		if err == nil {
			host = u.Hostname()
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return sb, fmt.Errorf("%s: DLC_S3_ENDPOINT %q: the sandbox forwards only an S3 endpoint on a loopback IP (such as http://127.0.0.1:9000) into its replicas' network", o.sandboxSource(), s3Endpoint)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		sb.Forward = []string{net.JoinHostPort(host, port)}
	}
	for _, f := range []string{c.NATS.Creds, c.NATS.TLS.Cert, c.NATS.TLS.Key, c.Temporal.TLS.Cert, c.Temporal.TLS.Key,
		o.configFile, c.Worker.Local.StateDir} {
		if f != "" {
			abs, err := filepath.Abs(f)
			if err != nil {
				return sb, fmt.Errorf("%s: %w", o.sandboxSource(), err)
			}
			sb.Hide = append(sb.Hide, abs)
		}
	}
	return sb, nil
}

// sandboxSource names what turned the sandbox on: its flag, variable or field.
func (o *workerOptions) sandboxSource() string {
	if src, ok := o.source["worker.local.sandbox"]; ok {
		return src
	}
	return "worker.local.sandbox"
}
