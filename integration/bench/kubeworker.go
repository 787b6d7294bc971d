package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/kubestack"
)

// kubeWorker is what the Kubernetes benchmarks (kube.go, scale.go) run against: a kwok
// control plane, the embedded stack without its own worker, and a worker in this
// process with the kube backend.
type kubeWorker struct {
	cluster *kubestack.Cluster
	e       *embedded.Embedded
	backend *kube.Backend
	w       *app.Process
	c       *client.Client
}

// kubeWorkerOptions shape a kubeWorker.
type kubeWorkerOptions struct {
	nodes int
	// nodeGrace is the control plane's node monitor grace period; 0: kubestack's
	// default.
	nodeGrace time.Duration
	// clientset is the worker's clientset, built from the cluster; nil: a clientset of
	// the cluster's administrator with the cluster's client rate limits.
	clientset func(*kubestack.Cluster) (kubernetes.Interface, error)
	// backend are the kube backend's options, after the quiet logger.
	backend []kube.Option
	// heartbeatBudget is the worker's --heartbeat-budget; 0: the default.
	heartbeatBudget float64
	// temporalOnPostgres runs the Temporal server on PostgreSQL instead of the dev
	// server (embedded.Config.TemporalOnPostgres).
	temporalOnPostgres bool
}

// startKubeWorker starts a kubeWorker under dir; close ends it.
func startKubeWorker(ctx context.Context, dir string, o kubeWorkerOptions) (k *kubeWorker, err error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	k = &kubeWorker{}
	defer func() {
		if err != nil {
			k.close()
		}
	}()
	if k.cluster, err = kubestack.Start(ctx, kubestack.Options{Dir: filepath.Join(dir, "cluster"), Nodes: o.nodes, NodeMonitorGracePeriod: o.nodeGrace}); err != nil {
		return nil, err
	}
	if k.e, err = embedded.Start(ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", NoWorker: true, Logger: quiet,
		TemporalOnPostgres: o.temporalOnPostgres}); err != nil {
		return nil, err
	}
	// The worker has a clientset (and so a client-side rate limiter) of its own: the
	// bench's own requests (its client-go baseline, its polling) must not queue
	// behind the worker's, nor the worker's behind them.
	clientset := o.clientset
	if clientset == nil {
		clientset = func(c *kubestack.Cluster) (kubernetes.Interface, error) {
			return kubernetes.NewForConfig(rest.CopyConfig(c.Admin))
		}
	}
	cs, err := clientset(k.cluster)
	if err != nil {
		return nil, err
	}
	if k.backend, err = kube.New(cs, append([]kube.Option{kube.WithLogger(quiet)}, o.backend...)...); err != nil {
		return nil, err
	}
	if k.w, err = app.Start(ctx, k.e.AppConfig(app.Config{Worker: true, Backend: k.backend, Logger: quiet, HeartbeatBudget: o.heartbeatBudget})); err != nil {
		return nil, err
	}
	if k.c, err = client.New(k.e.APIURL, client.WithToken(k.e.AdminToken)); err != nil {
		return nil, err
	}
	return k, nil
}

// close stops what startKubeWorker started, the worker first.
func (k *kubeWorker) close() {
	if k.w != nil {
		k.w.Close()
	}
	if k.backend != nil {
		k.backend.Close()
	}
	if k.e != nil {
		k.e.Close()
	}
	if k.cluster != nil {
		k.cluster.Close()
	}
}
